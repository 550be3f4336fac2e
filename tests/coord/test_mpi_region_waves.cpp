// The region waves under mpirun (coord/region_plan.h): ranks of two stores
// (even ranks one directory, odd ranks another, as node-local caches on two
// hosts) whose programs differ (2 and 3 layers) but call the same layer
// region. The region is compiled once for the job and sent to the other
// store; a region damaged in transit, or one the compiling rank could not
// store, is compiled again by the receiver, never served; a slow sender
// within the timeout changes nothing. Every result equals eager. A program
// an owner read from its own store brings its regions into another store
// only when the owner's regions/ vouches for them.
#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/device.h>
#include <npucache/mpi.h>

#include "compiler/region_stack.h"
#include "compiler/serialize.h"
#include "coord/fault_transport.h"
#include "coord/transport.h"
#include "format/names.h"
#include "mpi/comm.h"
#include "storage/regions.h"
#include "support/mpi_temp_dir_test.h"
#include "support/process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
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
  MethodReport run(bool deeper = false) { return run_in(store, deeper && rank == 3 ? 4 : 2 + rank % 2); }
  // This rank's first coordinated call of a `layers`-layer model on the
  // cache `dir`; its report.
  MethodReport run_in(const std::string& dir, int layers) {
    region_stack::Stack m(layers, 0, 8);
    CacheOptions o;
    o.cache_dir = dir;
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
  // The region files of store `s`, and of the cache `dir`.
  std::set<std::string> regions(int s) const { return regions_in(base + "/store" + std::to_string(s)); }
  static std::set<std::string> regions_in(const std::string& dir) {
    std::set<std::string> out;
    const fs::path d = fs::path(dir) / format::names::kRegionsDir;
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

// A program an owner read from its own store, brought into another store
// by a rank of that store, brings the regions it calls only when the
// owner's regions/ holds them as the program has them: a store may hold a
// program whose regions it never took (an unsigned remote's is saved
// without them), and its object alone is no proof. Even ranks use store
// `a`, warm from a job of every rank; odd ranks a new store each time.
TEST_F(RegionWaves, AStoresProgramBringsOnlyTheRegionsThatStoreVouchesFor) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks or more";
  const std::string a = base + "/a";
  const fs::path held = fs::path(a) / format::names::kRegionsDir, kept = held.string() + ".kept";
  (void)run_in(a, 2);
  mpi::Comm::world().barrier(kTest);
  const std::set<std::string> files = regions_in(a);
  ASSERT_EQ(files.size(), 1u);        // alike on every rank: one directory, read after the barrier
  mpi::Comm::world().barrier(kTest);  // every rank has read it before rank 0 moves it
  const auto job = [&](const std::string& other) {
    const MethodReport r = run_in(rank % 2 ? other : a, 2);
    EXPECT_EQ(total(r.regions_compiled), 0) << "every rank runs the program store a holds";
    mpi::Comm::world().barrier(kTest);
    return total(r.regions_copied);
  };
  // Store a's object with other bytes (one compile timing more): the same
  // program, another writer's.
  const auto retimed = [](const std::string& dir) {
    const storage::Store from = storage::Store::open(dir, storage::Create::no);
    format::ObjectRecord o = from.object(from.object_keys().at(0));
    bool with_program = false;
    compiler::CompiledGraph g = compiler::deserialize_compiled(o.raw, &with_program);
    g.timings.push_back({"retimed", 1.0, ""});
    o.raw = compiler::serialize_compiled(g, with_program);
    o.meta.raw_size = o.raw.size();
    o.meta.checksum = format::checksum(o.raw);
    return o;
  };
  // What rank 0 alone does to store a between jobs; every rank learns
  // whether it worked (a failure ends the test on every rank, never a hang).
  const auto on_rank0 = [&](const std::function<void()>& f) {
    bool ok = true;
    if (rank == 0) try {
        f();
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ok = false;
      }
    return total(ok ? 0 : 1) == 0;
  };
  // 1. Store a holds the program but not its region.
  if (!on_rank0([&] { fs::rename(held, kept); })) return;
  EXPECT_EQ(job(base + "/b1"), 0);
  EXPECT_TRUE(regions_in(base + "/b1").empty()) << "a region store a never took was copied from its program";
  // 2. Store a holds it: the other store gets the same file.
  if (!on_rank0([&] {
        fs::remove_all(held);
        fs::rename(kept, held);
      }))
    return;
  EXPECT_EQ(job(base + "/b2"), 1);
  EXPECT_EQ(regions_in(base + "/b2"), files);
  // 3. The other store gets the key's object from another writer just
  // before its commit (as a claim saved beside the job would): its rank
  // runs the object the store kept (run_kept), which nobody vouched for,
  // and copies nothing.
  {
    Fault f;
    f.kind = Fault::Kind::act;
    f.rank = 1;
    f.phase = coord::Phase::persist;
    f.action = [&] {
      const storage::Store to = storage::Store::open(base + "/b3", storage::Create::yes);
      ASSERT_FALSE(to.put_object(retimed(a), to.writing()).adopted);
    };
    install(f);
  }
  EXPECT_EQ(job(base + "/b3"), 0);
  EXPECT_TRUE(regions_in(base + "/b3").empty()) << "the regions of the object the store kept were copied";
  coord::install_transport(nullptr);
  // 4. Store a's object is replaced between the owner's lookup (a hit) and
  // its read of the bytes it sends: it vouches only for the object it hit.
  {
    Fault f;
    f.kind = Fault::Kind::act;
    f.rank = 0;  // the owner: the lowest rank holding the key
    f.phase = coord::Phase::compile;
    f.action = [&] {
      const format::ObjectRecord o = retimed(a);
      fs::remove(fs::path(a) / format::names::kObjectsDir / format::names::object_file(o.graph_key));
      const storage::Store s = storage::Store::open(a, storage::Create::no);
      ASSERT_FALSE(s.put_object(o, s.writing()).adopted);
    };
    install(f);
  }
  EXPECT_EQ(job(base + "/b4"), 0);
  EXPECT_TRUE(regions_in(base + "/b4").empty()) << "the owner vouched for an object it did not send";
  coord::install_transport(nullptr);
  const std::string sound = testing_support::slurp(held / *files.begin());  // the file store a vouches with
  // 5. Store a holds another program under the region's key (a scratch
  // buffer more): it vouches for nothing.
  if (!on_rank0([&] {
        const storage::Store s = storage::Store::open(a, storage::Create::no);
        const std::string key = fs::path(*files.begin()).stem().string();
        format::RegionRecord r = *storage::read_region(s, key);
        compiler::BufferDesc scratch;
        scratch.kind = compiler::BufferKind::temp;
        scratch.type = TensorType{DType::f32, {SymExpr(4)}};
        r.artifact.compiled.program.buffers.push_back(scratch);
        const auto lock = s.writing();
        storage::put_region(s, key, format::encode_region_file(r.validity, r.artifact), lock, true);
      }))
    return;
  EXPECT_EQ(job(base + "/b5"), 0);
  EXPECT_TRUE(regions_in(base + "/b5").empty()) << "a region unlike store a's was copied";
  // 6. Store a's sound region file, with one byte of its record flipped:
  // a file that does not read vouches for nothing.
  if (!on_rank0([&] {
        std::string bytes = sound;
        bytes.at(64) ^= 0x5a;
        std::ofstream(held / *files.begin(), std::ios::binary | std::ios::trunc) << bytes;
      }))
    return;
  EXPECT_EQ(job(base + "/b6"), 0);
  EXPECT_TRUE(regions_in(base + "/b6").empty()) << "a damaged region file vouched for its program";
}

}  // namespace
