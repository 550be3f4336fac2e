// main() of MPI test binaries: one MPI session around GoogleTest; only rank
// 0 prints results; a failure on any rank fails the job.
#include <npucache/mpi.h>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  npucache::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (npucache::MpiSession::world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  return rc;
}
