// The region waves under mpirun (coord/region_plan.h): ranks of two stores
// (even ranks one directory, odd ranks another, as node-local caches on two
// hosts) whose programs differ (2 and 3 layers) but call the same layer
// region. The region is compiled once for the job and sent to the other
// store; a region damaged in transit, or one the compiling rank could not
// store, is compiled again by the receiver, never served; a slow sender
// within the timeout changes nothing. Every result equals eager.
#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/device.h>
#include <npucache/mpi.h>

#include "compiler/region_stack.h"
#include "coord/fault_transport.h"
#include "coord/transport.h"
#include "format/names.h"
#include "mpi/comm.h"
#include "support/mpi_temp_dir_test.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

using namespace npucache;
using testing_support::Fault;
using testing_support::FaultTransport;
namespace fs = std::filesystem;

namespace {

const mpi::Step& kTest = testing_support::kMpiTestStep;
constexpr double kTimeout = 10;

class RegionWaves : public testing_support::MpiTempDirTest {
 protected:
  RegionWaves() : MpiTempDirTest("regionwaves") {}
  void SetUp() override {
    MpiTempDirTest::SetUp();
    store = base + "/store" + std::to_string(rank % 2);
  }
  void TearDown() override {
    coord::install_transport(nullptr);
    MpiTempDirTest::TearDown();
  }

  void install(Fault f) {
    coord::install_transport(std::make_shared<FaultTransport>(coord::mpi_transport(kTimeout), std::move(f)));
  }

  // This rank's first coordinated call: 2 layers on even ranks, 3 on odd
  // (with `deeper`, 4 on rank 3: a second program of the odd ranks'
  // store), one region; its report.
  MethodReport run(bool deeper = false) {
    region_stack::Stack m(deeper && rank == 3 ? 4 : 2 + rank % 2, 0, 8);
    CacheOptions o;
    o.cache_dir = store;
    o.compile.fullgraph = true;
    CompilerConfig c;
    c.autotune_candidates = 1;
    c.autotune_min_time_us = 0;
    o.compile.config = c;
    dist::CoordinatorOptions co;
    co.timeout_s = kTimeout;
    auto f = dist::cache_compile(m, &region_stack::Stack::forward, o, co);
    region_stack::expect_as_eager(f, m);
    const auto reps = dist::reports();
    return reps.empty() ? MethodReport{} : reps.back();
  }
  int total(int mine) const {
    int n = 0;
    for (const auto& s : mpi::Comm::world().allgather(std::to_string(mine), kTest)) n += std::stoi(s);
    return n;
  }
  // The region files of store `s`.
  std::set<std::string> regions(int s) const {
    std::set<std::string> out;
    const fs::path d = fs::path(base) / ("store" + std::to_string(s)) / format::names::kRegionsDir;
    if (fs::exists(d))
      for (const auto& e : fs::directory_iterator(d)) out.insert(e.path().filename().string());
    return out;
  }

  std::string store;
};

TEST_F(RegionWaves, ALayerOfTwoStoresIsCompiledOncePerJob) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks or more";
  const MethodReport r = run();
  EXPECT_EQ(total(r.regions_compiled), 1) << "one region, compiled once for both stores";
  EXPECT_EQ(total(r.regions_copied), 1) << "sent to the other store once";
  EXPECT_EQ(total(r.regions_reused), 1) << "and taken there";
  mpi::Comm::world().barrier(kTest);
  EXPECT_EQ(regions(0).size(), 1u);
  EXPECT_EQ(regions(0), regions(1));
}

// Two owners of the other store (3 and 4 layers) both wait for the region
// and both receive it: neither compiles it again.
TEST_F(RegionWaves, EveryOwnerOfTheOtherStoreTakesTheRegion) {
  if (world < 4) GTEST_SKIP() << "needs 4 ranks or more";
  const MethodReport r = run(true);
  EXPECT_EQ(total(r.regions_compiled), 1);
  EXPECT_EQ(total(r.regions_reused), 2);
  EXPECT_EQ(total(r.regions_copied), 1) << "the first to store it publishes the file";
}

// The bytes arrive damaged: the receiver's put_region refuses them, its
// compile compiles the region (two compiles), and every result is eager's.
TEST_F(RegionWaves, ARegionDamagedInTransitIsCompiledAgainNeverServed) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks or more";
  Fault f;
  f.kind = Fault::Kind::corrupt;
  f.rank = 1;
  f.step = "receiving compiled region";
  install(f);
  const MethodReport r = run();
  EXPECT_EQ(total(r.regions_compiled), 2);
  EXPECT_EQ(total(r.regions_copied), 0);
  mpi::Comm::world().barrier(kTest);
  EXPECT_EQ(regions(0), regions(1)) << "each store holds the region it compiled";
}

// The compiling rank's store cannot hold the region (its regions/ became a
// file once the compile began): it sends nothing, and the other store's
// compile compiles the region itself; nobody waits for the timeout.
TEST_F(RegionWaves, ARegionTheCompilerCouldNotStoreIsCompiledByTheReceiver) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks or more";
  Fault f;
  f.kind = Fault::Kind::act;
  f.rank = 0;
  f.phase = coord::Phase::compile;
  f.action = [&] {
    const fs::path d = fs::path(store) / format::names::kRegionsDir;
    fs::remove_all(d);
    std::ofstream(d) << "not a directory";
  };
  install(f);
  const auto t0 = std::chrono::steady_clock::now();
  const MethodReport r = run();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kTimeout);
  EXPECT_EQ(total(r.regions_compiled), 2);
  EXPECT_EQ(total(r.regions_copied), 0);
}

// A sender slower than the others within the timeout changes nothing.
TEST_F(RegionWaves, ASlowSenderWithinTheTimeoutChangesNothing) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks or more";
  Fault f;
  f.kind = Fault::Kind::slow;
  f.rank = 0;
  f.step = "sending compiled region";
  f.seconds = 2;
  install(f);
  const MethodReport r = run();
  EXPECT_EQ(total(r.regions_compiled), 1);
  EXPECT_EQ(total(r.regions_copied), 1);
}

}  // namespace
