// cache_compile and the HDF5 store, across real processes: hits and misses,
// the seed's rules, h5dump and the zstd plugin, crash and concurrency
// safety, security checks, bundles, gc and explain (caches of earlier
// formats: test_cache_formats.cpp).
#include <npucache/cache.h>
#include <npucache/error.h>
#include <npucache/models/models.h>

#include "cache/cache_test.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "format/object_file.h"
#include "format/tuning_file.h"
#include "process/context.h"
#include "storage/store.h"
#include "support/cache_files.h"

#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

using namespace npucache;
namespace fs = std::filesystem;

using testing_support::has;
using testing_support::Out;
using testing_support::sh;

TEST_F(CacheTest, HitAcrossProcessesSkipsCompiling) {
  Out cold = sh(worker(dir));
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_TRUE(has(cold.text, "compiled 1\nstatus compiled\nreason absent")) << cold.text;
  EXPECT_TRUE(has(cold.text, "Cache ModelCacheMeta(name='Model.prompt(arg0, arg1)'")) << cold.text;
  EXPECT_TRUE(has(cold.text, ", fx=None) saved to " + dir.string() + "/Model_dynamic_")) << cold.text;
  EXPECT_TRUE(has(cold.text, "/prompt/compiled_module\n")) << cold.text;
  Out warm = sh(worker(dir));
  ASSERT_EQ(warm.status, 0) << warm.text;
  EXPECT_TRUE(has(warm.text, "traced 1\ncompiled 0\nstatus hit")) << warm.text;  // one verifying trace
  EXPECT_TRUE(has(warm.text, ") loaded from ")) << warm.text;
  auto result = [](const std::string& t) { return t.substr(t.find("result")); };
  EXPECT_EQ(result(cold.text), result(warm.text));
  // Another batch size on the dynamic graph: still a hit.
  Out other = sh(worker(dir, "prompt --batch 5"));
  EXPECT_TRUE(has(other.text, "compiled 0\nstatus hit")) << other.text;
  // ge_cache decides what a save stores, not what the model is: the entry
  // is shared, and a ge_cache run loads the stored graph without compiling.
  Out ge_warm = sh(worker(dir, "prompt --ge-cache"));
  EXPECT_TRUE(has(ge_warm.text, "compiled 0\nstatus hit")) << ge_warm.text;
  EXPECT_EQ(result(ge_warm.text), result(cold.text));
  EXPECT_EQ(entry_paths().size(), 1u);  // Model_dynamic_<h>/prompt
  // In a fresh directory ge_cache stores the program; both levels load it.
  const fs::path ge_dir = dir / "ge";
  Out ge_cold = sh(worker(ge_dir.string(), "prompt --ge-cache"));
  EXPECT_TRUE(has(ge_cold.text, "compiled 1")) << ge_cold.text;
  EXPECT_TRUE(has(sh(worker(ge_dir.string(), "prompt --ge-cache")).text, "compiled 0\nstatus hit"));
  EXPECT_TRUE(has(sh(worker(ge_dir.string(), "prompt")).text, "compiled 0\nstatus hit"));
  fs::remove_all(ge_dir);
  // Every file 0600, every directory 0700.
  for (const auto& f : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    ASSERT_EQ(::lstat(f.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, S_ISDIR(st.st_mode) ? 0700u : 0600u) << f.path();
  }
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(CacheTest, ReduceOverheadEntryNamesAclgraphAndWarnsAboutGeCache) {
  // A setting is warned about once per process, however often a method is
  // made with it.
  Out o = sh(worker(dir, "prompt --reduce-overhead --ge-cache --constructions 5"));
  ASSERT_EQ(o.status, 0) << o.text;
  const std::string warning = "ge_cache has no effect in reduce-overhead mode";
  std::size_t warnings = 0;
  for (auto at = o.text.find(warning); at != std::string::npos; at = o.text.find(warning, at + 1)) ++warnings;
  EXPECT_EQ(warnings, 1u) << o.text;
  auto paths = entry_paths();
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_TRUE(has(paths[0], "Model_dynamic_aclgraphcache_")) << paths[0];
  EXPECT_FALSE(has(paths[0], "gecache_")) << paths[0];
  EXPECT_TRUE(has(sh(worker(dir, "prompt --reduce-overhead")).text, "compiled 0\nstatus hit"));
}

TEST_F(CacheTest, RngGraphIsRefusedAndNothingWritten) {
  Out o = sh(worker(dir, "noisy --rng"));
  EXPECT_NE(o.status, 0);
  EXPECT_TRUE(has(o.text, "(dropout) draws random numbers")) << o.text;
  EXPECT_TRUE(has(o.text, "Nothing was written")) << o.text;
  EXPECT_TRUE(entry_paths().empty());
}

TEST_F(CacheTest, StaleRuntimeVersionIsRecompiledAndReplaced) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  Out o = sh("NPUCACHE_SIM_RUNTIME_VERSION=9.9.9 " + worker(dir));
  EXPECT_TRUE(
      has(o.text, "is stale (runtime_version: stored 'simnpu-v1 runtime 1.0.0', now 'simnpu-v1 runtime 9.9.9')"))
      << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1\nstatus compiled\nreason stale (runtime_version")) << o.text;
  // The log says what happened: a compile, not a reuse.
  EXPECT_TRUE(has(o.text, "is recompiled: no stored object of its graph")) << o.text;
  EXPECT_FALSE(has(o.text, "reusing the stored object")) << o.text;
  EXPECT_TRUE(has(sh("NPUCACHE_SIM_RUNTIME_VERSION=9.9.9 " + worker(dir)).text, "compiled 0"));  // replaced
  EXPECT_EQ(entry_paths().size(), 1u);
  Out explain = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string());
  EXPECT_TRUE(has(explain.text, "(stale)")) << explain.text;
  EXPECT_TRUE(has(explain.text, "runtime_version: stored 'simnpu-v1 runtime 1.0.0', now 'simnpu-v1 runtime 9.9.9'"))
      << explain.text;
}

TEST_F(CacheTest, ChangedComputationIsAMissWithItsReason) {
  // A plain member used in the computation (read from a flag) changes
  // between runs: the trace shows it, the stored program is not served.
  Out two = sh(worker(dir, "prompt --scale 2"));
  ASSERT_EQ(two.status, 0) << two.text;
  Out three = sh(worker(dir, "prompt --scale 3"));
  ASSERT_EQ(three.status, 0) << three.text;
  EXPECT_TRUE(has(three.text, "compiled 1\nstatus compiled\nreason computation (graph: node")) << three.text;
  EXPECT_TRUE(has(three.text, "constant 2 stored, 3 now")) << three.text;
  EXPECT_TRUE(has(three.text, "result 12 24 36")) << three.text;  // 3 x (4, 8, 12), not the stored 2x
  EXPECT_TRUE(has(two.text, "result 8 16 24")) << two.text;
  Out again = sh(worker(dir, "prompt --scale 3"));
  EXPECT_TRUE(has(again.text, "compiled 0\nstatus hit")) << again.text;  // replaced
  EXPECT_EQ(entry_paths().size(), 1u);
}

// A flag picks which of two same-shaped layers the method reads: the entry
// made with one choice is never served for the other (the object of the
// same computation is, bound to the other layer's weights).
TEST_F(CacheTest, WhichParametersAGraphReadsIsPartOfTheEntry) {
  const fs::path fresh = dir.string() + "-fresh";
  fs::remove_all(fresh);
  Out b_alone = sh(worker(fresh.string(), "prompt --pick b"));
  ASSERT_EQ(b_alone.status, 0) << b_alone.text;
  fs::remove_all(fresh);
  Out a = sh(worker(dir, "prompt --pick a"));
  ASSERT_EQ(a.status, 0) << a.text;
  Out b = sh(worker(dir, "prompt --pick b"));
  ASSERT_EQ(b.status, 0) << b.text;
  auto result = [](const std::string& t) { return t.substr(t.find("result")); };
  EXPECT_EQ(result(b.text), result(b_alone.text)) << b.text;
  EXPECT_NE(result(a.text), result(b.text));
  EXPECT_TRUE(has(b.text, "compiled 0\nstatus hit")) << b.text;  // the object is shared, no compile
  EXPECT_TRUE(has(b.text, "the graph reads other parameters: stored [a.weight, a.bias], now [b.weight, b.bias]"))
      << b.text;
  Out b_again = sh(worker(dir, "prompt --pick b"));
  EXPECT_TRUE(has(b_again.text, "compiled 0\nstatus hit\nreason \n")) << b_again.text;
  EXPECT_EQ(result(b_again.text), result(b_alone.text));
  Out a_again = sh(worker(dir, "prompt --pick a"));
  EXPECT_EQ(result(a_again.text), result(a.text)) << a_again.text;
}

// A plain floating argument is a guard compared bit for bit: 1e-7 and 1e-9
// differ (six-digit text made them equal), on the fast path too.
TEST_F(CacheTest, FloatGuardsAreExact) {
  Out small = sh(worker(dir, "prompt --temperature 1e-7 --fast --code-version v1"));
  ASSERT_EQ(small.status, 0) << small.text;
  EXPECT_TRUE(has(small.text, "result 4e-07 8e-07 1.2e-06")) << small.text;
  Out smaller = sh(worker(dir, "prompt --temperature 1e-9 --fast --code-version v1"));
  ASSERT_EQ(smaller.status, 0) << smaller.text;
  EXPECT_TRUE(has(smaller.text, "result 4e-09 8e-09 1.2e-08")) << smaller.text;
  EXPECT_TRUE(has(smaller.text, "guard failed: 'arg2' was 1e-07 when traced, now 1e-09")) << smaller.text;
  Out same = sh(worker(dir, "prompt --temperature 1e-9"));
  EXPECT_TRUE(has(same.text, "result 4e-09 8e-09 1.2e-08")) << same.text;
}

// Class templates make names of hundreds of characters: each is cached
// under a short readable prefix plus a hash, the full name recorded.
TEST_F(CacheTest, LongTypeNamesAreCached) {
  for (int n : {200, 225, 239, 300, 1000}) {
    const std::string args = "prompt --long-name " + std::to_string(n);
    Out cold = sh(worker(dir, args));
    ASSERT_EQ(cold.status, 0) << cold.text;
    EXPECT_TRUE(has(cold.text, "saved to")) << n << ": " << cold.text;  // (the object is shared: one compile)
    Out warm = sh(worker(dir, args));
    EXPECT_TRUE(has(warm.text, "compiled 0\nstatus hit")) << n << ": " << warm.text;
  }
  for (const auto& p : entry_paths()) {
    const std::string model_info = p.substr(0, p.find('/'));
    EXPECT_LE(model_info.size(), 140u) << model_info;
    EXPECT_EQ(model_info.rfind("ns.Model_ns.Arg_0_", 0), 0u) << model_info;
  }
  EXPECT_EQ(entry_paths().size(), 5u);  // one model each: the hash tells them apart
  Out ls = sh(std::string(NPUCACHE_CLI) + " ls " + dir.string() + " --json");
  EXPECT_TRUE(has(ls.text, "ns::Model<ns::Arg<0>, ns::Arg<1>, ")) << ls.text;  // the full name is recorded
}

// A miss caused by changed options names what changed: the nearest entry
// of the same method under another model_info, option by option.
TEST_F(CacheTest, ExplainNamesChangedOptionsAndConfig) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  Out cfg = sh(worker(dir, "prompt --candidates 3"));
  EXPECT_TRUE(has(cfg.text, "reason absent (nearest entry Model_dynamic_")) << cfg.text;
  EXPECT_TRUE(has(cfg.text, "config option autotune_candidates: stored '2', now '3'")) << cfg.text;
  Out stat = sh(worker(dir, "prompt --static"));
  EXPECT_TRUE(has(stat.text, "dynamic: stored 'true', now 'false'")) << stat.text;
  Out ro = sh(worker(dir, "prompt --reduce-overhead"));
  EXPECT_TRUE(has(ro.text, "mode: stored 'max-autotune', now 'reduce-overhead'")) << ro.text;
  // explain shows the last job's misses (each worker is a job of its own),
  // not a window mixing the jobs before it.
  Out x = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string());
  EXPECT_EQ(x.status, 0) << x.text;
  EXPECT_TRUE(has(x.text, "mode: stored 'max-autotune', now 'reduce-overhead'")) << x.text;
  EXPECT_TRUE(has(x.text, "absent, other settings")) << x.text;
  EXPECT_TRUE(has(x.text, "misses of the last job ")) << x.text;
  EXPECT_TRUE(has(x.text, "(3 earlier job(s) in stats.json)")) << x.text;
  EXPECT_FALSE(has(x.text, "autotune_candidates")) << "an earlier job's miss: " << x.text;
  EXPECT_FALSE(has(x.text, "dynamic: stored")) << "an earlier job's miss: " << x.text;
  EXPECT_TRUE(has(x.text, "verdict: 1 recent miss(es)")) << x.text;
}

// After a layout change (here the world size) a miss names the nearest
// entry of the method in the other layout and what differs, in the
// lookup's reason and in explain; not "first run of that entry".
TEST_F(CacheTest, ExplainNamesTheOtherLayoutsEntry) {
  ASSERT_EQ(sh(worker(dir, "prompt --world 2 --rank 1")).status, 0);
  Out moved = sh(worker(dir, "prompt --world 4 --rank 3"));
  ASSERT_EQ(moved.status, 0) << moved.text;
  EXPECT_TRUE(has(moved.text,
                  "reason absent (another layout (stored world 2 tp 1 pp 1, now world 4 tp 1 pp 1); "
                  "nearest entry Model_dynamic_"))
      << moved.text;
  EXPECT_TRUE(has(moved.text,
                  "/world2global_rank1/prompt; world size: stored 2, now 4; rank: stored global_rank 1 "
                  "(tp_rank 0, pp_rank 0), now global_rank 3 (tp_rank 0, pp_rank 0)"))
      << moved.text;
  Out x = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string());
  EXPECT_EQ(x.status, 0) << x.text;
  EXPECT_TRUE(has(x.text, "  world size: stored 2, now 4\n")) << x.text;
  EXPECT_TRUE(has(x.text, "absent, another layout")) << x.text;
  EXPECT_FALSE(has(x.text, "first run")) << x.text;
  // Once this layout stored the method (rank 3), another rank's miss is
  // its first run, not the layout's.
  Out other_rank = sh(worker(dir, "prompt --world 4 --rank 2"));
  EXPECT_TRUE(has(other_rank.text, "reason absent; the stored object")) << other_rank.text;
}

// Switching back to a variant whose object is stored is said at INFO, as
// what it is, never warned about as "another computation"; a real change
// of the computation still is.
TEST_F(CacheTest, SwitchingBackToAStoredVariantIsInfoNotAWarning) {
  ASSERT_EQ(sh(worker(dir, "prompt --static --batch 3")).status, 0);
  Out other = sh(worker(dir, "prompt --static --batch 5"));
  EXPECT_TRUE(has(other.text, "[WARNING]")) << other.text;  // a new variant: compiled, entry replaced
  Out back = sh(worker(dir, "prompt --static --batch 3"));
  ASSERT_EQ(back.status, 0) << back.text;
  EXPECT_TRUE(has(back.text, "compiled 0\n")) << back.text;
  EXPECT_TRUE(has(back.text, "is of another variant of this method")) << back.text;
  EXPECT_TRUE(has(back.text, "this call's variant is stored: switching back to it")) << back.text;
  EXPECT_FALSE(has(back.text, "[WARNING]")) << back.text;
  Out changed = sh(worker(dir, "prompt --static --batch 3 --scale 2"));
  EXPECT_TRUE(has(changed.text, "[WARNING]") && has(changed.text, "was compiled from another computation"))
      << changed.text;
}

// Automatic dynamic: rank 0's entry was traced static; another rank saw
// the batch change and made the dim dynamic (the profile is the model's).
// Rank 0's next start traces the dim symbolic: an INFO line that says so,
// not a warning about another computation.
TEST_F(CacheTest, AutomaticDynamicMakingADimSymbolicIsInfoNotAWarning) {
  ASSERT_EQ(sh(worker(dir, "prompt --auto --batch 3")).status, 0);
  Out other = sh(worker(dir, "prompt --auto --world 2 --rank 1 --batch 3 --second-batch 5"));
  ASSERT_EQ(other.status, 0) << other.text;
  Out again = sh(worker(dir, "prompt --auto --batch 3"));
  ASSERT_EQ(again.status, 0) << again.text;
  EXPECT_TRUE(has(again.text, "[INFO]") && has(again.text, "was traced before automatic dynamic made a dim symbolic"))
      << again.text;
  EXPECT_FALSE(has(again.text, "[WARNING]")) << again.text;
}

// A model change names the first parameter whose shape differs, not two
// parameter-signature hashes; explain says the same.
TEST_F(CacheTest, ModelChangeNamesTheParameterThatDiffers) {
  ASSERT_EQ(sh(worker(dir, "prompt --extra 2")).status, 0);
  Out changed = sh(worker(dir, "prompt --extra 3"));
  ASSERT_EQ(changed.status, 0) << changed.text;
  EXPECT_TRUE(has(changed.text, "parameter extra: stored f32[2], now f32[3]")) << changed.text;
  EXPECT_FALSE(has(changed.text, "parameter_signature")) << changed.text;
  Out x = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string());
  EXPECT_TRUE(has(x.text, "  parameter extra: stored f32[2], now f32[3]\n")) << x.text;
  const auto paths = entry_paths();
  ASSERT_EQ(paths.size(), 2u);
  Out e = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string() + " --entry " + paths[0]);
  EXPECT_TRUE(has(e.text, "  parameter extra: stored f32[")) << e.text;
  EXPECT_FALSE(has(e.text, "parameter_signature")) << e.text;
}

TEST_F(CacheTest, CodeVersionFastPathSkipsTheTraceAndTrustsTheVersion) {
  ASSERT_EQ(sh(worker(dir, "prompt --fast --code-version v1")).status, 0);
  Out warm = sh(worker(dir, "prompt --fast --code-version v1"));
  EXPECT_TRUE(has(warm.text, "traced 0\ncompiled 0\nstatus hit")) << warm.text;  // no trace at all
  Out o = sh(worker(dir, "prompt --fast --code-version v2"));
  EXPECT_TRUE(has(o.text, "code_version: stored 'v1', now 'v2'")) << o.text;
  // The same computation is stored (under its graph key): a trace and a read.
  EXPECT_TRUE(has(o.text, "compiled 0\nstatus hit")) << o.text;
  EXPECT_TRUE(has(o.text, "the stored object of the same computation was reused")) << o.text;
  // The fast path without a code_version is a configuration error.
  Out bad = sh(worker(dir, "prompt --fast"));
  EXPECT_NE(bad.status, 0);
  EXPECT_TRUE(has(bad.text, "set code_version")) << bad.text;
  // The default check ignores code_version: the computation decides.
  EXPECT_TRUE(has(sh(worker(dir, "prompt --code-version v3")).text, "compiled 0\nstatus hit"));
}

TEST_F(CacheTest, StaleEntryIsReportedWithTheComponent) {
  ASSERT_EQ(sh(worker(dir, "prompt --code-version v1")).status, 0);
  // Same model_info path can only be reused when every component matches;
  // make the stored entry stale by editing its recorded runtime version.
  auto entries = entry_paths();
  ASSERT_EQ(entries.size(), 1u);
  {
    auto e = testing_support::entries(dir).at(0);
    e.meta.components["runtime_version"] = "simnpu-v1 runtime 0.0.1";
    testing_support::put_entry(dir, e);
  }
  Out o = sh(worker(dir, "prompt --code-version v1"));
  EXPECT_TRUE(
      has(o.text, "is stale (runtime_version: stored 'simnpu-v1 runtime 0.0.1', now 'simnpu-v1 runtime 1.0.0')"))
      << o.text;
  EXPECT_TRUE(has(o.text, "compiled 0\nstatus hit")) << o.text;  // its object is this runtime's: reused
  // ...and the log says so, not that it recompiles.
  EXPECT_TRUE(has(o.text,
                  "is stale (runtime_version: stored 'simnpu-v1 runtime 0.0.1', now 'simnpu-v1 runtime "
                  "1.0.0'); replacing it"))
      << o.text;
  EXPECT_TRUE(has(o.text, "reusing the stored object, no compile")) << o.text;
  EXPECT_FALSE(has(o.text, "recompil")) << o.text;
  EXPECT_TRUE(has(sh(worker(dir, "prompt --code-version v1")).text, "compiled 0\nstatus hit\nreason \n"));  // replaced
  Out explain = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string());
  EXPECT_TRUE(has(explain.text, "runtime_version: stored 'simnpu-v1 runtime 0.0.1', now 'simnpu-v1 runtime 1.0.0'"))
      << explain.text;
}

TEST_F(CacheTest, CorruptEntryIsReportedRebuiltAndOthersUntouched) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(sh(worker(dir, "prompt --static")).status, 0);
  auto entries = entry_paths();
  ASSERT_EQ(entries.size(), 2u);
  std::string dyn = entries[0].find("dynamic") != std::string::npos ? entries[0] : entries[1];
  {  // replace the dynamic entry's object by junk with a valid envelope and checksum
    const storage::Store store = storage::Store::open(dir, storage::Create::no);
    std::string key;
    for (const auto& e : testing_support::entries(dir))
      if (e.path == dyn) key = e.graph_key;
    storage::ObjectRecord junk = store.object(key);
    junk.raw = std::string(junk.raw.size(), 'Z');
    junk.meta.checksum = storage::checksum(junk.raw);  // the content hash is made with the record, never by the store
    store.remove_object(key, store.sweeping(5));
    store.put_object(junk, store.writing());
  }
  Out o = sh(worker(dir));
  EXPECT_TRUE(has(o.text, "is unusable")) << o.text;
  EXPECT_TRUE(has(o.text, "cannot be decoded")) << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1")) << o.text;
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0"));                     // rebuilt
  EXPECT_TRUE(has(sh(worker(dir, "prompt --static")).text, "compiled 0"));  // untouched
  // An index whose HDF5 view is truncated still serves (its records are
  // intact); verify reports the view, and the reader rewrites it.
  fs::path index;
  for (const auto& f : fs::directory_iterator(dir))
    if (has(f.path().filename().string(), "Model_dynamic_") && f.path().extension() == ".h5") index = f.path();
  fs::resize_file(index, fs::file_size(index) * 2 / 3);
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 1) << v.text;
  EXPECT_TRUE(has(v.text, "HDF5 view (for h5dump) is damaged")) << v.text;
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0\nstatus hit")) << "served from intact records";
  EXPECT_EQ(sh(std::string(NPUCACHE_CLI) + " verify " + dir.string()).status, 0) << "healed by the reader";
  // A truncated index loses its records: reported, rebuilt from the trace
  // (the object is intact: no compile).
  fs::resize_file(index, 100);
  Out t = sh(worker(dir));
  EXPECT_EQ(t.status, 0) << t.text;
  EXPECT_TRUE(has(t.text, "compiled 0")) << t.text;  // a trace and a read, never a compile
  EXPECT_TRUE(has(t.text, "is damaged")) << t.text;
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0\nstatus hit"));
}

TEST_F(CacheTest, RecompileSkipsTheCacheAndRemovesTheEntry) {
  CacheOptions o;
  o.cache_dir = dir.string();
  o.compile.dynamic = false;
  o.compile.method_name = "prompt";
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  models::SeedExample m;
  auto fn = cache_compile(m, &models::SeedExample::prompt, o);
  auto call = [&](int64_t b) {
    models::InputMeta x{Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(2 * b), 1.0f), {b, 2}), true};
    std::vector<Tensor> kv{Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(2 * b), 1.0f), {b, 2})};
    return fn(x, kv).to_vector();
  };
  EXPECT_EQ(call(2), (std::vector<float>{6, 6}));
  EXPECT_EQ(entry_paths().size(), 1u);
  EXPECT_EQ(call(3), (std::vector<float>{6, 6, 6}));  // a new static shape: recompiled, still correct
  EXPECT_TRUE(entry_paths().empty());
  EXPECT_EQ(call(3), (std::vector<float>{6, 6, 6}));
}

TEST_F(CacheTest, H5dumpShowsTheSeedPathsAndThePluginDecodes) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(sh(worker(dir, "prompt --static")).status, 0);
  auto entries = entry_paths();
  ASSERT_EQ(entries.size(), 2u);
  const std::string model_info = storage::names::model_info_of(entries[0]);
  const fs::path index = dir / (model_info + ".h5");
  Out h = sh("h5dump -H " + index.string());
  ASSERT_EQ(h.status, 0) << h.text;
  // The seed's path, /<model_info>/<func>/compiled_module, leads to the object.
  EXPECT_TRUE(has(h.text, "GROUP \"" + model_info + "\"")) << h.text;
  EXPECT_TRUE(has(h.text, "GROUP \"prompt\"")) << h.text;
  EXPECT_TRUE(has(h.text, "EXTERNAL_LINK \"compiled_module\"")) << h.text;
  EXPECT_TRUE(has(h.text, "TARGETFILE \"objects/")) << h.text;
  EXPECT_TRUE(has(h.text, "ATTRIBUTE \"runtime_version\"")) << h.text;
  Out ls = sh("h5ls -r " + index.string());
  EXPECT_EQ(ls.status, 0) << ls.text;
  EXPECT_TRUE(has(ls.text, "/" + entries[0].substr(model_info.size() + 1) + "/compiled_module External Link"))
      << ls.text;
  // The bytes decode through the plugin, following the external link.
  const std::string ds = "/" + entries[0] + "/compiled_module";
  Out plain = sh("cd " + dir.string() + " && HDF5_PLUGIN_PATH=/nonexistent h5dump -d " + ds + " " + index.string());
  EXPECT_NE(plain.status, 0) << plain.text;  // without the plugin the bytes cannot be read
  Out decoded = sh("cd / && HDF5_PLUGIN_PATH=" + std::string(PLUGIN_DIR) + " h5dump -d " + ds + " " + index.string());
  EXPECT_EQ(decoded.status, 0) << decoded.text;
  EXPECT_TRUE(has(decoded.text, "DATA {")) << decoded.text;
  Out object = sh("h5dump -H -p " + (dir / "objects").string() + "/" +
                  testing_support::entries(dir.string())[0].graph_key + ".h5");
  EXPECT_TRUE(has(object.text, "FILTER_ID 32015")) << object.text;
}

TEST_F(CacheTest, KillDuringSaveLeavesAValidCache) {
  std::mt19937 rng(7);
  std::size_t last = 0;
  for (int round = 0; round < 8; ++round) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(CACHE_WORKER, CACHE_WORKER, "write", dir.c_str(), ("r" + std::to_string(round) + "_").c_str(), "50",
              "400000", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 180));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!fs::exists(dir)) continue;  // killed before it made the directory (a slow start): nothing to check
    auto entries = testing_support::entries(dir);
    EXPECT_GE(entries.size(), last) << "round " << round << ": entries were lost";
    last = entries.size();
    if (!fs::exists(dir)) continue;  // killed before it made the directory (a slow start under load)
    const storage::Store store = storage::Store::open(dir, storage::Create::no);
    for (const auto& e : entries) EXPECT_NO_THROW(store.object(e.graph_key)) << e.path;
  }
  EXPECT_GT(last, 0u);
  // No temporary of a killed writer survives a repair.
  ASSERT_EQ(sh(std::string(NPUCACHE_CLI) + " verify --repair " + dir.string()).status, 0);
  for (const auto& f : fs::recursive_directory_iterator(dir))
    EXPECT_FALSE(has(f.path().filename().string(), ".tmp.")) << f.path();
}

TEST_F(CacheTest, ConcurrentWritersLoseNoEntry) {
  Out a_b = sh(std::string("(") + CACHE_WORKER + " write " + dir.string() + " a 12 20000 & " + CACHE_WORKER +
               " write " + dir.string() + " b 12 20000 & wait)");
  ASSERT_EQ(a_b.status, 0) << a_b.text;
  auto paths = entry_paths();
  EXPECT_EQ(paths.size(), 24u);
}

TEST_F(CacheTest, SymlinkedOrForeignFilesAreRefusedAndTheMethodRunsUncached) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  fs::path index;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".h5" && f.path().filename() != storage::names::kTuningFile) index = f.path();
  fs::path real = dir / "real.bin";
  fs::rename(index, real);
  fs::create_symlink(real, index);
  Out o = sh(worker(dir));
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "is a symbolic link")) << o.text;
  EXPECT_TRUE(has(o.text, "running uncached")) << o.text;
  // The verified object of the same computation still serves; nothing is
  // written through the link, which is left alone.
  EXPECT_TRUE(has(o.text, "compiled 0\nstatus hit")) << o.text;
  EXPECT_TRUE(fs::is_symlink(index));
  fs::remove(index);
  fs::rename(real, index);
  if (::geteuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  ASSERT_EQ(::chown(index.c_str(), 65534, 65534), 0);
  Out f = sh(worker(dir));
  EXPECT_EQ(f.status, 0) << f.text;
  EXPECT_TRUE(has(f.text, "owned by uid 65534")) << f.text;
  EXPECT_TRUE(has(f.text, "running uncached")) << f.text;
  struct stat st;
  ASSERT_EQ(::stat(index.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);  // not replaced
}

TEST_F(CacheTest, ExportImportGcAndStatsCommands) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(sh(worker(dir, "prompt --static")).status, 0);
  const std::string cli = NPUCACHE_CLI;
  const fs::path bundle = dir.string() + ".bundle";
  const fs::path other = dir.string() + "-imported";
  fs::remove_all(other);
  ASSERT_EQ(sh(cli + " export " + dir.string() + " -o " + bundle.string()).status, 0);
  Out imp = sh(cli + " import " + bundle.string() + " " + other.string());
  ASSERT_EQ(imp.status, 0) << imp.text;
  EXPECT_TRUE(has(sh(worker(other.string())).text, "compiled 0"));  // hits in the empty directory
  EXPECT_TRUE(has(sh(worker(other.string(), "prompt --static")).text, "compiled 0"));
  std::string corrupt;
  {
    std::ifstream f(bundle, std::ios::binary);
    corrupt.assign(std::istreambuf_iterator<char>(f), {});
  }
  corrupt[corrupt.size() / 2] ^= 0x55;
  EXPECT_THROW(load_cache_artifacts(corrupt, other.string()), CacheError);
  Out stats = sh(cli + " stats " + other.string());
  EXPECT_TRUE(has(stats.text, "entries          2")) << stats.text;
  EXPECT_TRUE(has(stats.text, "hits             2")) << stats.text;
  Out ls = sh(cli + " ls " + other.string());
  EXPECT_TRUE(has(ls.text, "2 entries")) << ls.text;
  Out gc = sh(cli + " gc " + other.string() + " --max-size 1");
  EXPECT_EQ(gc.status, 0) << gc.text;
  EXPECT_TRUE(has(gc.text, "2 of 2 entries")) << gc.text;
  Out verify = sh(cli + " verify " + other.string());
  EXPECT_EQ(verify.status, 0) << verify.text;
  EXPECT_TRUE(has(sh(worker(other.string())).text, "compiled 1"));  // evicted: compiled again
  Out readable =
      sh(cli + " readable " + (other / testing_support::entry_paths(other.string())[0] / "compiled_module").string());
  EXPECT_EQ(readable.status, 0) << readable.text;
  EXPECT_TRUE(has(readable.text, "## traced graph")) << readable.text;
  EXPECT_TRUE(has(readable.text, "linear(")) << readable.text;
  ASSERT_EQ(sh(cli + " clear " + other.string()).status, 0);
  EXPECT_TRUE(testing_support::entry_paths(other.string()).empty());
  EXPECT_FALSE(fs::exists(other / "objects"));
  fs::remove_all(other);
  fs::remove(bundle);
}

TEST_F(CacheTest, SaveAndLoadCacheArtifactsInProcess) {
  CacheOptions o;
  o.cache_dir = dir.string();
  o.compile.method_name = "decode";
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  models::SeedExample m;
  auto fn = cache_compile(m, &models::SeedExample::decode, o);
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), false};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  fn(x, kv);
  std::string bytes = save_cache_artifacts();
  const fs::path other = dir.string() + "-mega";
  fs::remove_all(other);
  load_cache_artifacts(bytes, other.string());
  bool found = false;
  for (const auto& p : testing_support::entry_paths(other.string())) found = found || has(p, "/decode");
  EXPECT_TRUE(found);
  fs::remove_all(other);
}

// One process saves one computation twice, to two directories, as two
// different objects (without its program, then with; then the reverse):
// the artifacts hold the entry as it was saved last, with that save's
// object, and load.
TEST_F(CacheTest, SavedArtifactsPairEachEntryWithTheObjectItNames) {
  models::SeedExample m;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), false};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  for (const bool program_last : {true, false}) {
    std::map<bool, std::string> checksum;  // with program -> the object saved
    for (const bool with_program : {!program_last, program_last}) {
      CacheOptions o;
      o.cache_dir = dir.string() + (program_last ? "/a-" : "/b-") + (with_program ? "with" : "without");
      o.compile.method_name = "decode";
      o.compile.config = CompilerConfig{};
      o.compile.config->autotune_candidates = 1;
      o.ge_cache = with_program;
      auto fn = cache_compile(m, &models::SeedExample::decode, o);
      fn(x, kv);
      const auto saved = testing_support::entries(o.cache_dir);
      ASSERT_EQ(saved.size(), 1u);
      checksum[with_program] = saved[0].object_checksum;
    }
    ASSERT_NE(checksum[true], checksum[false]) << "the two saves wrote the same object";
    const fs::path other = dir / (program_last ? "loaded-a" : "loaded-b");
    ASSERT_NO_THROW(load_cache_artifacts(save_cache_artifacts(), other.string()));
    bool found = false;
    for (const auto& e : testing_support::entries(other.string())) {
      if (!has(e.path, "/decode")) continue;
      found = true;
      EXPECT_EQ(e.object_checksum, checksum[program_last]) << e.path << " is not the entry saved last";
      EXPECT_EQ(e.with_program, program_last) << e.path;
      EXPECT_EQ(storage::Store::open(other.string(), storage::Create::no).object_meta(e.graph_key).checksum,
                checksum[program_last]);
    }
    EXPECT_TRUE(found);
  }
}

// A process whose entry reuses a stored object (its index was lost, the
// object kept: the commit writes the entry and pins the object) bundles
// that entry and object in its artifacts.
TEST_F(CacheTest, SavedArtifactsHoldAnEntryThatReusedAStoredObject) {
  models::SeedExample m;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), false};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  CacheOptions o;
  o.cache_dir = dir.string();
  o.compile.method_name = "decode";
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  {
    process::Context::Scope first;
    auto fn = cache_compile(m, &models::SeedExample::decode, o);
    fn(x, kv);
  }
  {
    const storage::Store s = storage::Store::open(dir.string(), storage::Create::no);
    for (const auto& mi : s.model_infos()) ASSERT_TRUE(fs::remove(s.index_path(mi)));
    ASSERT_EQ(s.object_keys().size(), 1u);
  }
  process::Context::Scope second;  // a new process: it remembers only what it saves or loads
  auto fn = cache_compile(m, &models::SeedExample::decode, o);
  fn(x, kv);
  ASSERT_EQ(testing_support::entries(dir.string()).size(), 1u);
  const fs::path other = dir.string() + "-reused";
  fs::remove_all(other);
  ASSERT_NO_THROW(load_cache_artifacts(save_cache_artifacts(), other.string()));
  EXPECT_EQ(testing_support::entries(other.string()).size(), 1u) << "the reusing entry is not in the artifacts";
  fs::remove_all(other);
}

namespace {

// The first four columns, doubled: a call with fewer columns fails, traced
// or eager.
struct Head : nn::Module {
  std::string type_name() const override { return "Head"; }
  Tensor head(const Tensor& x) { return x.slice(1, 0, 4) * 2.0f; }
};

Tensor columns(int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(2 * n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::from_vector(v, {2, n});
}

}  // namespace

// A first call that fails (here its trace, as eager code does) leaves the
// method as it was: the next call is its first call, looked up, compiled
// and saved (it once read an entry that did not exist, found by the
// differential hunt as a bad_alloc), for compile() and cache_compile().
TEST_F(CacheTest, AFailedFirstCallLeavesTheMethodUntouched) {
  Head h;
  CacheOptions o;
  o.cache_dir = dir.string();
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  auto cached = cache_compile(h, &Head::head, o);
  auto compiled = compile(h, &Head::head, o.compile);
  for (int round = 0; round < 2; ++round) {
    EXPECT_THROW((void)cached(columns(3)), ShapeError);
    EXPECT_THROW((void)compiled(columns(3)), ShapeError);
  }
  EXPECT_EQ(cached(columns(6)).to_vector(), h.head(columns(6)).to_vector());
  EXPECT_EQ(compiled(columns(6)).to_vector(), h.head(columns(6)).to_vector());
  EXPECT_EQ(cached.status().outcome, Outcome::compiled) << cached.status().reason;
  EXPECT_TRUE(cached.status().cached) << cached.status().reason;
  EXPECT_EQ(cached.compiles(), 1u);
  EXPECT_EQ(compiled.compiles(), 1u);
  auto again = cache_compile(h, &Head::head, o);
  EXPECT_EQ(again(columns(5)).to_vector(), h.head(columns(5)).to_vector());
  EXPECT_EQ(again.status().outcome, Outcome::hit) << again.status().reason;
}

namespace {

// "tuning <tuned> <reused>" of a worker's output: {-1, -1} when absent.
std::pair<int, int> tuning_counts(const std::string& output) {
  const std::string text = "\n" + output;
  const auto at = text.find("\ntuning ");
  if (at == std::string::npos) return {-1, -1};
  int tuned = -1, reused = -1;
  if (std::sscanf(text.c_str() + at, "\ntuning %d %d", &tuned, &reused) != 2) return {-1, -1};
  return {tuned, reused};
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_F(CacheTest, TuningIsSharedThroughTheCacheDirectoryAcrossProcessesAndModels) {
  Out cold = sh(worker(dir));
  ASSERT_EQ(cold.status, 0) << cold.text;
  const auto [tuned, reused] = tuning_counts(cold.text);
  EXPECT_GE(tuned, 1) << cold.text;
  EXPECT_EQ(reused, 0) << cold.text;
  const fs::path table = dir / storage::names::kTuningFile;
  ASSERT_TRUE(fs::exists(table));
  const auto records = storage::decode_tuning(file_bytes(table), table.string());
  EXPECT_EQ(static_cast<int>(records.size()), tuned);
  // Another model of the same matmul shapes, in another process: its matmul
  // comes from the table, and the program is the one a fresh tuning with
  // the same choices gives.
  Out other = sh(worker(dir, "prompt --other"));
  ASSERT_EQ(other.status, 0) << other.text;
  EXPECT_TRUE(has(other.text, "compiled 1\nstatus compiled")) << other.text;
  const auto [tuned2, reused2] = tuning_counts(other.text);
  EXPECT_GE(reused2, 1) << other.text;
  EXPECT_GE(tuned2, 0) << other.text;
  EXPECT_TRUE(has(other.text, "same_program 1")) << other.text;
  // Its new decisions (its own fused kernels) joined the file.
  EXPECT_EQ(storage::decode_tuning(file_bytes(table), table.string()).size(),
            records.size() + static_cast<std::size_t>(tuned2));
  // The table off: everything timed.
  fs::remove_all(dir / "objects");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".h5" && e.path() != table) fs::remove(e.path());
  Out off = sh(worker(dir, "prompt --other --no-shared-tuning"));
  ASSERT_EQ(off.status, 0) << off.text;
  EXPECT_TRUE(has(off.text, "status compiled")) << off.text;
  EXPECT_EQ(tuning_counts(off.text).second, 0) << off.text;
  EXPECT_GE(tuning_counts(off.text).first, 1) << off.text;
  // A person reads it with h5dump: one group per runtime, one line per decision.
  Out h = sh("h5dump " + table.string());
  ASSERT_EQ(h.status, 0) << h.text;
  EXPECT_TRUE(has(h.text, "GROUP \"simnpu-v1 runtime 1.0.0\"")) << h.text;
  EXPECT_TRUE(has(h.text, "DATASET \"decisions\"")) << h.text;
  EXPECT_TRUE(has(h.text, "matmul f32[3, 2] f32[1, 2] trans_b | tile_")) << h.text;
}

TEST_F(CacheTest, DamagedTuningFileIsIgnoredWithAWarningAndRewritten) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const std::string good = file_bytes(dir / storage::names::kTuningFile);
  ASSERT_GT(good.size(), 600u);
  const std::size_t userblock = 512;  // the seed's few decisions fit the smallest userblock
  std::vector<std::size_t> offsets = {
      0, 9, 13, 30, 50, 60, 70, userblock - 1, userblock + 100, good.size() / 2, good.size() - 3};
  int n = 0;
  for (std::size_t at : offsets) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    const fs::path d = dir.string() + "-damaged-" + std::to_string(n++);
    fs::remove_all(d);
    fs::create_directories(d);
    fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
    { std::ofstream(d / storage::names::kTuningFile, std::ios::binary) << bad; }
    fs::permissions(d / storage::names::kTuningFile, fs::perms::owner_read | fs::perms::owner_write,
                    fs::perm_options::replace);
    Out o = sh(worker(d.string(), "prompt --other"));
    EXPECT_EQ(o.status, 0) << "offset " << at << ": " << o.text;
    EXPECT_TRUE(has(o.text, "status compiled")) << o.text;
    EXPECT_TRUE(has(o.text, "tuning.h5 is damaged")) << "offset " << at << ": " << o.text;
    EXPECT_TRUE(has(o.text, "its decisions are ignored and it is rewritten on the next save")) << o.text;
    EXPECT_EQ(tuning_counts(o.text).second, 0) << "offset " << at << ": " << o.text;  // nothing of it used
    const std::string now = file_bytes(d / storage::names::kTuningFile);
    EXPECT_NE(now, bad);
    EXPECT_NO_THROW(storage::decode_tuning(now, "rewritten")) << "offset " << at;
    fs::remove_all(d);
  }
  // A file that is not npucache's at all.
  const fs::path d = dir.string() + "-foreign";
  fs::remove_all(d);
  fs::create_directories(d);
  fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
  { std::ofstream(d / storage::names::kTuningFile) << "not a tuning table\n"; }
  fs::permissions(d / storage::names::kTuningFile, fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  Out o = sh(worker(d.string(), "prompt --other"));
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "not npucache's")) << o.text;
  EXPECT_NO_THROW(storage::decode_tuning(file_bytes(d / storage::names::kTuningFile), "rewritten"));
  // The cache tools do not take it for an index, and clear removes it.
  Out ls = sh(std::string(NPUCACHE_CLI) + " verify " + d.string());
  EXPECT_FALSE(has(ls.text, "tuning.h5 is damaged")) << ls.text;
  fs::remove_all(d);
}
