// A fixture for GoogleTest programs run under mpirun: every rank works in
// one temporary directory, rank 0's.
//
// Contract:
//   - MpiTempDirTest(tag): SetUp sets `world` and `rank` (MPI_COMM_WORLD),
//     the rank's device (rank modulo the devices), clears the coordinator's
//     reports, and gives every rank `base`: rank 0 makes a TempDir tagged
//     `tag` and the test's name (support/temp_dir_test.h), and broadcasts
//     its path. TearDown waits for every rank (a barrier), then rank 0
//     removes `base` and everything in it. A fixture with more to do
//     overrides SetUp/TearDown and calls these (SetUp first, TearDown
//     last: after it, other ranks may be gone from the directory).
//   - kMpiTestStep: the bound of a test's own collectives (a helper's
//     allgather of results), 60 s.
#pragma once

#include <npucache/coordinator.h>
#include <npucache/device.h>

#include "mpi/comm.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

namespace npucache::testing_support {

inline const mpi::Step kMpiTestStep{"test helper", 60};

class MpiTempDirTest : public ::testing::Test {
 protected:
  explicit MpiTempDirTest(std::string tag) : tag_(std::move(tag)) {}
  void SetUp() override {
    world = mpi::Comm::world().size();
    rank = mpi::Comm::world().rank();
    set_current_device(rank % Platform::get().device_count());
    std::string d;
    if (rank == 0) {
      temp.emplace(tag_, current_test_name());
      d = temp->path().string();
    }
    mpi::Comm::world().broadcast(d, 0, kMpiTestStep);
    base = d;
    dist::clear_reports();
  }
  void TearDown() override {
    mpi::Comm::world().barrier(kMpiTestStep);
    temp.reset();  // rank 0's: the directory and everything in it, whatever its permissions
  }

  int world = 1, rank = 0;
  std::optional<TempDir> temp;  // rank 0 only
  std::string base;             // rank 0's directory, on every rank

 private:
  std::string tag_;
};

}  // namespace npucache::testing_support
