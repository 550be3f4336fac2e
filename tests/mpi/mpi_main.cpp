// main() of MPI test binaries: one MPI session around GoogleTest. Rank 0
// prints the usual report; other ranks print only their failures, prefixed
// with their rank. A failure on any rank fails the job (its exit status).
#include <npucache/mpi.h>

#include <gtest/gtest.h>

#include <cstdio>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  npucache::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = npucache::MpiSession::world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
