// Compiled regions in the store (storage/regions.h, cache/region_library.h):
// a region compiled once is taken by every later compile that calls it --
// a model of another depth, another method -- and never by a compile it
// does not fit: another region's file under its name, a damaged file,
// other compile settings. The rendezvous of processes compiling the same
// region at once, and gc, verify and clear beside them.
#include <gtest/gtest.h>

#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/ir/hash.h>
#include <npucache/ops.h>

#include "admin/admin.h"
#include "cache/region_library.h"
#include "compiler/link_program.h"
#include "compiler/program.h"
#include "compiler/region_stack.h"
#include "format/envelope.h"
#include "format/names.h"
#include "process/context.h"
#include "process/env.h"
#include "storage/claims.h"
#include "storage/gc.h"
#include "storage/regions.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "support/region_counts.h"
#include "support/temp_dir_test.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

namespace npucache {
namespace {

namespace fs = std::filesystem;
using region_stack::Inputs;
using region_stack::inputs;
using region_stack::Stack;

class RegionStore : public testing_support::TempDirTest {
 protected:
  // What this process's compiles did with regions since the last call.
  // {hits, compiles} of regions since the last call (or the test's start).
  std::pair<uint64_t, uint64_t> region_counts() { return counts_.take(); }
  void SetUp() override {
    TempDirTest::SetUp();
    (void)counts_.take();
  }

  CacheOptions options(const std::string& mode = "default") const {
    CacheOptions o;
    o.cache_dir = dir.string();
    o.compile.mode = mode;
    o.compile.fullgraph = true;
    return o;
  }
  // A model of `depth` narrow and `wide` wide blocks, cached and run twice
  // against eager: its results and caches equal.
  void run_checked(int depth, int wide, const CacheOptions& o, float seed = 0.0f) {
    Stack m(depth, wide, 8);
    if (seed != 0.0f)
      for (auto& [name, t] : m.named_parameters()) {
        std::vector<float> v = t.to_vector();
        v[0] += seed;
        t.copy_from(v);
      }
    auto f = cache_compile(m, &Stack::forward, o);
    region_stack::expect_as_eager(f, m);
  }
  std::vector<storage::StoredRegion> regions() const {
    return storage::stored_regions(storage::Store::open(dir, storage::Create::no), true);
  }
  // A model of 3 narrow blocks stores its one region; `edit` changes the
  // stored record, which is written back in place of the file. The edited
  // file must still read as sound (`why`); a model of another depth then
  // compiles the region again (replacing the file) and the next one takes
  // the replaced file; both compute what eager does.
  // A model of 3 narrow blocks stores its one region: its key and record.
  std::pair<std::string, format::RegionRecord> one_stored_region() {
    run_checked(3, 0, options());
    region_counts();
    const auto rs = regions();
    EXPECT_EQ(rs.size(), 1u);
    return {rs.at(0).key, *storage::read_region(storage::Store::open(dir, storage::Create::no), rs.at(0).key)};
  }
  void expect_an_edited_region_compiled_again_and_replaced(const std::function<void(format::RegionRecord&)>& edit,
                                                           const std::string& why) {
    auto [key, r] = one_stored_region();
    edit(r);
    {
      const storage::Store s = storage::Store::open(dir, storage::Create::no);
      const auto held = s.writing();
      storage::put_region(s, key, format::encode_region_file(r.validity, r.artifact), held, true);
    }
    ASSERT_EQ(regions()[0].damage, "") << why;
    run_checked(2, 0, options(), 0.5f);
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1}));
    run_checked(4, 0, options(), 0.25f);
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{1}, uint64_t{0})) << "the replaced file serves";
  }

 private:
  testing_support::RegionCounts counts_;
};

TEST_F(RegionStore, AModelOfAnotherDepthCompilesNoRegion) {
  for (const char* mode : {"default", "max-autotune", "reduce-overhead"}) {
    SCOPED_TRACE(mode);
    fs::remove_all(dir);
    run_checked(4, 1, options(mode));
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{2})) << "the narrow and the wide block compile";
    ASSERT_EQ(regions().size(), 2u);
    for (const auto& r : regions()) EXPECT_EQ(r.damage, "") << r.path;
    // Other depths, other weights: other models, the same two regions.
    run_checked(2, 1, options(mode), 0.25f);
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{2}, uint64_t{0}));
    run_checked(6, 0, options(mode), -0.5f);
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{1}, uint64_t{0}));
    EXPECT_EQ(regions().size(), 2u);
  }
}

// explain --entry names the regions an entry's program calls and whether
// regions/ holds each for its settings.
TEST_F(RegionStore, ExplainNamesAnEntrysRegionsAndWhetherTheStoreHoldsThem) {
  Stack m(3, 1, 8);
  Inputs in = inputs(m, 2, 3, 8);
  auto f = cache_compile(m, &Stack::forward, options());
  (void)f(in.x, in.positions, in.caches);
  const std::string entry = fs::relative(fs::path(f.status().entry), dir).string();
  auto x = cache::admin::explain(dir.string(), entry);
  ASSERT_EQ(x.regions.size(), 2u) << entry;
  for (const auto& r : x.regions) EXPECT_NE(r.find(": in regions/ as "), std::string::npos) << r;
  const auto rs = regions();
  fs::remove(rs[0].path);
  x = cache::admin::explain(dir.string(), entry);
  int missing = 0;
  for (const auto& r : x.regions) missing += r.find("not in regions/") != std::string::npos;
  EXPECT_EQ(missing, 1);
}

TEST_F(RegionStore, OtherCompileSettingsShareNoRegion) {
  run_checked(3, 1, options("default"));
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{2}));
  run_checked(2, 1, options("max-autotune"));
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{2})) << "another mode";
  CacheOptions stat = options("default");
  stat.compile.dynamic = false;
  run_checked(2, 1, stat);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{2})) << "static";
  EXPECT_EQ(regions().size(), 6u);
}

// Custom decompositions are keyed by their name: two of one name that
// decompose the body otherwise never share its compiled region (each is
// tanh, so both equal eager).
TEST_F(RegionStore, ARegionDecomposedOtherwiseUnderTheSameNameIsNotTaken) {
  CacheOptions a = options(), b = options();
  a.compile.custom_decompositions[Op::tanh] = {"test.tanh", [](const std::vector<Tensor>& in, const Attrs&) {
                                                 return ops::sigmoid(in[0] * 2.0f) * 2.0f - 1.0f;
                                               }};
  b.compile.custom_decompositions[Op::tanh] = {"test.tanh", [](const std::vector<Tensor>& in, const Attrs&) {
                                                 const Tensor e = ops::exp(in[0] * 2.0f);
                                                 return (e - 1.0f) / (e + 1.0f);
                                               }};
  run_checked(3, 0, a);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1}));
  run_checked(2, 0, b, 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1})) << "decomposed otherwise: compiled";
  run_checked(4, 0, a, 0.25f);
  EXPECT_EQ(region_counts().first, 1u) << "the same decomposition: taken";
}

// A region file that decodes and names its key but whose program does not
// fit its calls (an input of another size): the link refuses it, the
// compile compiles every region again and stores it in the file's place.
TEST_F(RegionStore, ARegionProgramThatDoesNotFitItsCallsIsCompiledAgainAndReplaced) {
  // Its program's sizes named by symbols its body does not have: valid
  // alone, not the body's.
  expect_an_edited_region_compiled_again_and_replaced(
      [](format::RegionRecord& r) {
        const std::vector<std::string> names = canonical_symbols(r.artifact.body);
        ASSERT_FALSE(names.empty());
        std::map<std::string, SymExpr> other;
        for (const auto& n : names) other.emplace(n, SymExpr::symbol("zz_" + n));
        Graph renamed = r.artifact.body;
        renamed.substitute_symbols(other);
        r.artifact.compiled = compiler::renamed_region(r.artifact.compiled, names, renamed);
      },
      "it decodes and names its key");
}

// A planted program that decodes, validates alone and links, but names a
// size no call binds (a scratch buffer of an unknown symbol): the compile
// that takes it fails past the link, not in it. One bad file costs one
// compile: the regions are compiled again and the file replaced, by this
// compile and for every later one.
TEST_F(RegionStore, ARegionProgramThatBreaksTheCompilePastItsLinkIsCompiledAgainAndReplaced) {
  expect_an_edited_region_compiled_again_and_replaced(
      [](format::RegionRecord& r) {
        compiler::BufferDesc scratch;
        scratch.kind = compiler::BufferKind::temp;
        scratch.type = TensorType{DType::f32, {SymExpr::symbol("zz")}};
        r.artifact.compiled.program.buffers.push_back(scratch);
      },
      "it decodes and validates");
}

// A planted file: the narrow block's region under the wide block's name.
// It is another region's program (it would run with the wrong shapes), so
// it is reported, compiled again and replaced, never served.
TEST_F(RegionStore, ARegionFileOfAnotherRegionIsNeverServed) {
  run_checked(3, 1, options());
  region_counts();
  auto rs = regions();
  ASSERT_EQ(rs.size(), 2u);
  fs::copy_file(rs[0].path, rs[1].path, fs::copy_options::overwrite_existing);
  EXPECT_NE(regions()[1].damage.find("not its content's key"), std::string::npos) << regions()[1].damage;
  run_checked(2, 1, options(), 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{1}, uint64_t{1}));
  for (const auto& r : regions()) EXPECT_EQ(r.damage, "") << r.path;
}

// A region file whose key is the one asked for, but whose validity
// differs (a runtime version holding '|' moves part of a decomposition
// name into it: the key's '|'-joined text is the same), is not taken: the
// compile compares every field, compiles the region again and replaces
// the file.
TEST_F(RegionStore, ARegionFileValidForOtherSettingsUnderTheSameKeyIsNotTaken) {
  CacheOptions o = options();
  o.compile.custom_decompositions[Op::tanh] = {
      "t|x", [](const std::vector<Tensor>& in, const Attrs&) { return ops::sigmoid(in[0] * 2.0f) * 2.0f - 1.0f; }};
  run_checked(3, 0, o);
  region_counts();
  const auto rs = regions();
  ASSERT_EQ(rs.size(), 1u);
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  format::RegionRecord r = *storage::read_region(s, rs[0].key);
  ASSERT_EQ(r.validity.decompositions, "tanh:3:t|x");
  format::RegionRecord other = r;
  other.validity.runtime_version += "|tanh:3:t";
  other.validity.decompositions = "x";
  ASSERT_NE(other.validity, r.validity);
  ASSERT_EQ(format::region_key(other.validity), rs[0].key) << "not a collision";
  {
    const auto held = s.writing();
    storage::put_region(s, rs[0].key, format::encode_region_file(other.validity, other.artifact), held, true);
  }
  run_checked(2, 0, o, 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1})) << "a file valid for other settings was taken";
  EXPECT_EQ(storage::read_region(s, rs[0].key)->validity, r.validity) << "not replaced";
}

TEST_F(RegionStore, ADamagedRegionFileIsReportedAndRebuilt) {
  run_checked(3, 0, options());
  region_counts();
  auto rs = regions();
  ASSERT_EQ(rs.size(), 1u);
  {
    std::fstream f(rs[0].path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(rs[0].bytes / 3));
    f.put('\x5a');
  }
  const auto v = cache::admin::verify(dir.string(), false);
  ASSERT_EQ(v.bad.size(), 1u);
  EXPECT_EQ(v.bad[0].first, rs[0].path);
  EXPECT_EQ(v.regions, 1u);
  run_checked(4, 0, options(), 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1}));
  EXPECT_TRUE(cache::admin::verify(dir.string(), false).bad.empty());
  // verify --repair removes a damaged one.
  {
    std::fstream f(rs[0].path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(rs[0].bytes / 2));
    f.put('\x5a');
  }
  const auto repaired = cache::admin::verify(dir.string(), true);
  ASSERT_EQ(repaired.repaired.size(), 1u);
  EXPECT_NE(repaired.repaired[0].find("compiled region"), std::string::npos);
  EXPECT_TRUE(regions().empty());
  EXPECT_TRUE(cache::admin::verify(dir.string(), false).bad.empty());
}

// Damage at many offsets of a region file (header, record, zstd frame,
// HDF5 part, end): every compile after it gives eager's results, and the
// file is reported and rebuilt (verify is clean after), never served.
TEST_F(RegionStore, DamageAtManyOffsetsOfARegionFileIsRebuilt) {
  run_checked(3, 0, options());
  const auto rs = regions();
  ASSERT_EQ(rs.size(), 1u);
  std::string pristine;
  {
    std::ifstream in(rs[0].path, std::ios::binary);
    pristine.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::size_t n = pristine.size();
  ASSERT_GT(n, 1024u);
  int depth = 4;
  for (const std::size_t off : {std::size_t{0}, std::size_t{8}, std::size_t{60}, std::size_t{200}, std::size_t{511},
                                n / 4, n / 3, n / 2, 2 * n / 3, n - 9, n - 1}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    std::string bad = pristine;
    bad[off] = static_cast<char>(bad[off] ^ 0x5a);
    std::ofstream(rs[0].path, std::ios::binary | std::ios::trunc) << bad;
    EXPECT_FALSE(cache::admin::verify(dir.string(), false).bad.empty()) << "the damage is reported";
    region_counts();
    run_checked(depth, 0, options(), 0.125f * static_cast<float>(depth));
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1})) << "compiled, not served";
    EXPECT_TRUE(cache::admin::verify(dir.string(), false).bad.empty()) << "rebuilt";
    ++depth;  // another model each time: a compile, not a hit
  }
}

// Request threads compiling models of one region at once: each region is
// compiled once (the others wait for it or find it) and every result is
// eager's.
TEST_F(RegionStore, ThreadsCompilingOneRegionAtOnceCompileItOnce) {
  fs::create_directories(dir);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { run_checked(2 + t, 1, options(), 0.1f * static_cast<float>(t + 1)); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{6}, uint64_t{2}));
  EXPECT_EQ(regions().size(), 2u);
}

// `gc --max-size` far below the cache, run again and again beside request
// threads compiling models that take and store regions: regions vanish
// under compiles that were about to take them, and each such compile
// compiles the region instead; every result is eager's, no call fails,
// the regions left are intact, and the cache serves on afterwards.
TEST_F(RegionStore, ASizeLimitGcBesideCompilesTakingRegionsLosesNoResult) {
  run_checked(2, 1, options());
  std::atomic<bool> done{false};
  std::atomic<int> sweeps{0}, removed{0};
  std::thread admin([&] {
    storage::GcOptions tiny;
    tiny.max_size = 1;
    tiny.wait_s = 5;
    while (!done) {
      removed += static_cast<int>(storage::gc(dir.string(), tiny).removed_regions);
      ++sweeps;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int depth = 3; depth < 6; ++depth)
        run_checked(depth + 3 * t, 1, options(), 0.05f * static_cast<float>(depth + 7 * t));
    });
  for (auto& th : threads) th.join();
  done = true;
  admin.join();
  EXPECT_GT(sweeps.load(), 0);
  EXPECT_GT(removed.load(), 0) << "the sweeps removed no region: nothing raced";
  for (const auto& r : regions()) EXPECT_EQ(r.damage, "") << r.path;
  run_checked(11, 1, options(), 0.05f * 19.0f);  // a model a thread compiled, again: equal to eager
}

// The rendezvous: a region another process claimed is waited for and
// taken once stored; a claimer that never stores costs at most the wait.
// An Env that runs `before_lock` once, just before the next lock taken
// without waiting: between a claimant's open of the claim file and its
// lock, deterministically.
struct ReleasingBeforeLock : process::Env {
  std::function<void()> before_lock;
  bool waiting = false;  // before a lock taken waiting instead
  int flock(int fd, int operation) override {
    if ((operation & LOCK_EX) && ((operation & LOCK_NB) != 0) != waiting && before_lock) {
      auto f = std::move(before_lock);
      before_lock = nullptr;
      f();
    }
    return process::Env::flock(fd, operation);
  }
};

// A holder releasing a claim removes its file, then unlocks it. A claimant
// that opened the file before the removal locks it after: that lock is on
// a file no later claimant opens, so it is no claim (two processes would
// compile one region). Between its open and its lock the holder releases
// and a newcomer takes the claim; the newcomer holds it, the late
// claimant does not.
TEST_F(RegionStore, AClaimReleasedBetweenAnotherClaimantsOpenAndLockIsHeldOnce) {
  run_checked(1, 0, options());  // creates the store
  const std::string key(32, 'c');
  std::optional<storage::Claim> holder = storage::Claim::try_take(dir.string(), key);
  ASSERT_TRUE(holder.has_value());
  std::optional<storage::Claim> late, newcomer;
  auto env = std::make_shared<ReleasingBeforeLock>();
  env->before_lock = [&] {
    holder.reset();
    if (auto c = storage::Claim::try_take(dir.string(), key)) newcomer.emplace(std::move(*c));
  };
  {
    process::Context::Scope scope(env);
    if (auto c = storage::Claim::try_take(dir.string(), key)) late.emplace(std::move(*c));
  }
  EXPECT_FALSE(env->before_lock) << "the holder was released between the late claimant's open and lock";
  EXPECT_TRUE(newcomer.has_value()) << "the claim was free when the newcomer asked";
  EXPECT_FALSE(late.has_value()) << "two claimants hold one claim";
  // Released, it is free again.
  newcomer.reset();
  EXPECT_TRUE(storage::Claim::try_take(dir.string(), key).has_value());
}

// Any lock of locks/ (here a waiting one, as the tuning table's): a file
// removed between a process's open and its lock (by a clear) is no lock;
// the name is opened again and the lock taken on the file it names.
TEST_F(RegionStore, ALockWhoseFileWasRemovedBetweenOpenAndLockIsTakenOnItsNameAgain) {
  run_checked(1, 0, options());  // creates the store
  const storage::Dir locks =
      storage::Dir::open(dir, storage::Safety::cache, storage::Create::no).sub("locks", storage::Create::yes);
  auto env = std::make_shared<ReleasingBeforeLock>();
  env->waiting = true;
  env->before_lock = [&] { fs::remove(dir / "locks" / "tuning.lock"); };
  std::optional<storage::FileLock> held;
  {
    process::Context::Scope scope(env);
    held.emplace(locks.lock("tuning.lock"));
  }
  EXPECT_FALSE(env->before_lock) << "the file was removed between the open and the lock";
  const auto now = locks.stat("tuning.lock");
  ASSERT_TRUE(now.has_value()) << "the lock is held on a file no name refers to";
  EXPECT_EQ(now->ino, held->inode());
}

TEST_F(RegionStore, AClaimedRegionIsWaitedForThenTaken) {
  // The regions as another process would store them, in a second store.
  const fs::path other = dir.parent_path() / "other";
  {
    CacheOptions o = options();
    o.cache_dir = other.string();
    run_checked(3, 0, o);
  }
  region_counts();
  const auto stored = storage::stored_regions(storage::Store::open(other, storage::Create::no), true);
  ASSERT_EQ(stored.size(), 1u);
  // The claim, held by "another process", on this store's key.
  run_checked(0, 1, options());  // creates the store (a wide block's region only)
  region_counts();
  Stack m(3, 0, 8);
  Inputs in = inputs(m, 2, 3, 8);
  TraceOptions to;
  to.dynamic = true;
  const TraceResult tr = trace_method(m, &Stack::forward, to, in.x, in.positions, in.caches);
  ASSERT_EQ(tr.regions.size(), 1u);
  const std::string region = tr.regions.begin()->first;
  format::RegionValidity v = stored[0].validity.value();
  v.region.clear();
  const CompilerConfig config =
      storage::read_region(storage::Store::open(other, storage::Create::no), stored[0].key)->artifact.config;
  const storage::Store store = storage::Store::open(dir, storage::Create::no);
  cache::RegionLibrary waiting(store, config, v, 5.0, 0.02);
  const std::string key = waiting.key_of(region);
  EXPECT_EQ(key, stored[0].key);
  auto claim = storage::Claim::try_take(dir.string(), key);
  ASSERT_TRUE(claim.has_value());
  const auto t0 = std::chrono::steady_clock::now();
  std::thread claimer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    fs::copy_file(stored[0].path, dir / format::names::kRegionsDir / format::names::region_file(key));
    claim.reset();
  });
  waiting.prepare(tr);
  claimer.join();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(waiting.reused(), 1);
  EXPECT_EQ(waiting.waited(), 1);
  EXPECT_EQ(waiting.timed_out(), 0);
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 4.0);
  // A stuck claimer: this process compiles it after the wait.
  fs::remove(dir / format::names::kRegionsDir / format::names::region_file(key));
  auto stuck = storage::Claim::try_take(dir.string(), key);
  ASSERT_TRUE(stuck.has_value());
  cache::RegionLibrary impatient(store, config, v, 0.4, 0.02);
  const auto t1 = std::chrono::steady_clock::now();
  impatient.prepare(tr);
  const double gave_up = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_EQ(impatient.reused(), 0);
  EXPECT_EQ(impatient.timed_out(), 1);
  EXPECT_GE(gave_up, 0.35);
  EXPECT_LT(gave_up, 3.0);
}

TEST_F(RegionStore, GcRemovesRegionsOnlyUnusedLongerThanItsAgeAndClearRemovesAll) {
  run_checked(3, 1, options());
  auto rs = regions();
  ASSERT_EQ(rs.size(), 2u);
  // A plain gc leaves them (no entry names a region).
  storage::GcOptions plain;
  EXPECT_EQ(storage::gc(dir.string(), plain).removed_regions, 0u);
  EXPECT_EQ(regions().size(), 2u);
  // One unused for two hours, one just used.
  const timespec old[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, rs[0].path.c_str(), old, 0), 0);
  storage::GcOptions aged;
  aged.older_than_s = 3600;
  aged.dry_run = true;
  const auto preview = storage::gc(dir.string(), aged);
  EXPECT_EQ(preview.removed_regions, 1u);
  EXPECT_EQ(regions().size(), 2u) << "a dry run removes nothing";
  aged.dry_run = false;
  const auto done = storage::gc(dir.string(), aged);
  EXPECT_EQ(done.removed_regions, 1u);
  ASSERT_EQ(regions().size(), 1u);
  EXPECT_EQ(regions()[0].key, rs[1].key);
  // A reuse marks it used: aged again, then taken by a compile, it stays.
  ASSERT_EQ(::utimensat(AT_FDCWD, rs[1].path.c_str(), old, 0), 0);
  run_checked(2, 1, options(), 0.5f);
  EXPECT_EQ(storage::gc(dir.string(), aged).removed_regions, 0u);
  EXPECT_EQ(regions().size(), 2u);
  cache::admin::clear(dir.string());
  EXPECT_FALSE(fs::exists(dir / format::names::kRegionsDir));
}

// A region file of another cache format (a newer build's beside this one:
// its record names its format version, and its name is its own key) is not
// damage: verify lists it and reports no problem, verify --repair, gc and
// a size limit leave it; gc's --older-than removes it by its age. The same
// bytes under this format's key (which no build writes) are replaced by the
// next compile calling the region.
TEST_F(RegionStore, ARegionFileOfAnotherFormatIsLeftButGoesByAge) {
  auto [key, r] = one_stored_region();
  const auto rs = regions();
  r.validity.format_version = "99.0.0";
  const std::string bytes = format::encode_region_file(r.validity, r.artifact);
  const fs::path other = dir / format::names::kRegionsDir / format::names::region_file(format::region_key(r.validity));
  std::ofstream(other, std::ios::binary) << bytes;
  ASSERT_EQ(regions().size(), 2u);
  for (const auto& st : regions()) {
    EXPECT_EQ(st.damage, "") << st.path;
    EXPECT_EQ(st.other_format.empty(), st.path != other.string()) << st.path << ": " << st.other_format;
  }
  const auto v = cache::admin::verify(dir.string(), false);
  EXPECT_TRUE(v.bad.empty()) << v.bad.front().first << ": " << v.bad.front().second;
  ASSERT_EQ(v.other_format.size(), 1u);
  EXPECT_EQ(v.other_format[0].first, other.string());
  (void)cache::admin::verify(dir.string(), true);
  const auto unchanged = [&] {
    std::ifstream in(other, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {}) == bytes;
  };
  EXPECT_TRUE(unchanged()) << "verify --repair removed another format's region";
  storage::GcOptions plain, tight;
  tight.max_size = 1;
  const auto g1 = storage::gc(dir.string(), plain);
  EXPECT_TRUE(unchanged()) << "gc removed another format's region";
  EXPECT_EQ(g1.region_bytes, rs[0].bytes) << "another format's region is not counted against a limit";
  const auto g2 = storage::gc(dir.string(), tight);
  EXPECT_TRUE(unchanged()) << "a size limit removed another format's region";
  EXPECT_EQ(g2.removed_regions, 1u) << "this format's region is sized out";
  EXPECT_EQ(g2.region_bytes, 0u);
  storage::GcOptions aged;
  aged.older_than_s = 3600;
  const timespec two_hours[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, other.c_str(), two_hours, 0), 0);
  EXPECT_EQ(storage::gc(dir.string(), aged).removed_regions, 1u);
  EXPECT_FALSE(fs::exists(other));

  // Under this format's key: replaced by a compile, never taken.
  run_checked(3, 0, options());
  region_counts();
  const fs::path ours = regions().at(0).path;
  std::ofstream(ours, std::ios::binary | std::ios::trunc) << bytes;
  run_checked(2, 0, options(), 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1}));
  ASSERT_EQ(regions().size(), 1u);
  EXPECT_EQ(regions()[0].other_format, "") << "the compile replaced it";
}

// While gc is blocked (here by a later format's index beside the cache's
// own) no entry is evicted, so regions go to fit only when they alone can
// bring the total within the limit: a limit below the objects removes none
// (else every save would remove every region), one the objects fit removes
// them as usual.
TEST_F(RegionStore, WhileGcIsBlockedRegionsGoOnlyWhenTheyAloneCanFit) {
  run_checked(3, 1, options());
  ASSERT_EQ(regions().size(), 2u);
  fs::path own;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".h5" && f.path().filename().string().find("_dynamic_") != std::string::npos)
      own = f.path();
  ASSERT_FALSE(own.empty());
  {  // a later build's index: the same records, its model record of a later encoding
    std::ifstream in(own, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const format::Opened o = format::open_envelope(format::EnvelopeKind::index, bytes, own.string());
    std::vector<std::string> records = o.records;
    records[0][1] = static_cast<char>(records[0][1] + 1);
    std::ofstream(dir / "Later_dynamic_0123456789abcdef.h5", std::ios::binary)
        << format::seal(format::EnvelopeKind::index, records, std::string(o.hdf5), o.userblock);
  }
  storage::GcOptions below;
  below.max_size = 1;
  const auto g1 = storage::gc(dir.string(), below);
  EXPECT_FALSE(g1.blocked.empty());
  EXPECT_EQ(g1.removed_regions, 0u) << "the objects alone are over the limit";
  EXPECT_EQ(g1.evicted_entries, 0u);
  ASSERT_EQ(regions().size(), 2u);
  storage::GcOptions objects_fit;
  objects_fit.max_size = g1.remaining_bytes;
  const auto g2 = storage::gc(dir.string(), objects_fit);
  EXPECT_FALSE(g2.blocked.empty());
  EXPECT_EQ(g2.removed_regions, 2u) << "the regions alone bring it within the limit";
  EXPECT_EQ(g2.evicted_entries, 0u);
  EXPECT_TRUE(regions().empty());
}

// A size limit bounds the objects and the compiled regions together.
// Regions go first, least recently used first (losing one costs one compile
// of a layer, never an entry); no entry is evicted while removing regions
// suffices; a dry run removes nothing; the next compile stores the regions
// again, its results equal to eager. A save's own limit does the same.
TEST_F(RegionStore, ASizeLimitRemovesLeastRecentlyUsedRegionsBeforeAnyEntry) {
  run_checked(3, 1, options());
  const auto rs = regions();
  ASSERT_EQ(rs.size(), 2u);
  const timespec two_hours[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  const timespec one_hour[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, rs[0].path.c_str(), two_hours, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, rs[1].path.c_str(), one_hour, 0), 0);
  storage::GcOptions roomy;
  roomy.max_size = std::size_t{1} << 40;
  const auto all = storage::gc(dir.string(), roomy);
  EXPECT_EQ(all.removed_regions, 0u);
  EXPECT_EQ(all.region_bytes, rs[0].bytes + rs[1].bytes);
  const std::size_t objects = all.remaining_bytes;
  ASSERT_GT(objects, 0u);
  const std::size_t entries = all.entries;

  storage::GcOptions limit;
  limit.max_size = objects + rs[1].bytes;  // the objects and the newer region fit
  limit.dry_run = true;
  EXPECT_EQ(storage::gc(dir.string(), limit).removed_regions, 1u);
  EXPECT_EQ(regions().size(), 2u) << "a dry run removes nothing";
  limit.dry_run = false;
  const auto one = storage::gc(dir.string(), limit);
  EXPECT_EQ(one.removed_regions, 1u);
  EXPECT_EQ(one.evicted_entries, 0u);
  EXPECT_EQ(one.region_bytes, rs[1].bytes);
  ASSERT_EQ(regions().size(), 1u);
  EXPECT_EQ(regions()[0].key, rs[1].key) << "the least recently used region goes first";

  limit.max_size = objects;  // only the objects fit: the last region goes, no entry
  const auto none = storage::gc(dir.string(), limit);
  EXPECT_EQ(none.removed_regions, 1u);
  EXPECT_EQ(none.evicted_entries, 0u);
  EXPECT_EQ(none.entries, entries);
  EXPECT_TRUE(regions().empty());

  // The next compile (another depth) compiles both regions again and stores them.
  run_checked(2, 1, options(), 0.25f);
  region_counts();
  EXPECT_EQ(regions().size(), 2u);
  // A save under a limit the regions overflow removes regions, not the entry it saved.
  storage::set_max_size(dir.string(), objects + 1);
  run_checked(5, 1, options(), 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{2}, uint64_t{0}));
  EXPECT_LT(regions().size(), 2u);
  storage::set_max_size(dir.string(), std::nullopt);
  run_checked(5, 1, options(), 0.5f);  // served from its entry, equal to eager
}

}  // namespace
}  // namespace npucache
