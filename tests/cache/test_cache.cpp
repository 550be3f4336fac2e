// cache_compile and the HDF5 store, across real processes: hits and misses,
// the seed's rules, h5dump and the zstd plugin, crash and concurrency
// safety, security checks, bundles, gc and explain.
#include <npucache/cache.h>
#include <npucache/error.h>
#include <npucache/models/models.h>

#include "cache/store.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

struct Out {
  int status;
  std::string text;
};

// Runs a shell command, capturing stdout and stderr.
Out sh(const std::string& cmd) {
  Out o{0, ""};
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p)) o.text += buf.data();
  o.status = WEXITSTATUS(::pclose(p));
  return o;
}

std::string worker(const std::string& dir, const std::string& args = "prompt") {
  return std::string(CACHE_WORKER) + " run " + dir + " seed " + args;
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("npucache-test-" + std::to_string(::getpid()) + "-" +
                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<std::string> entry_paths() {
    auto r = cache::Hdf5Store(dir).reader();
    std::vector<std::string> out;
    if (r)
      for (const auto& e : r->entries()) out.push_back(e.path);
    return out;
  }
  fs::path dir;
};

}  // namespace

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
  // ge_cache stores the program; both levels load without compiling.
  Out ge_cold = sh(worker(dir, "prompt --ge-cache"));
  Out ge_warm = sh(worker(dir, "prompt --ge-cache"));
  EXPECT_TRUE(has(ge_cold.text, "compiled 1")) << ge_cold.text;
  EXPECT_TRUE(has(ge_warm.text, "compiled 0\nstatus hit")) << ge_warm.text;
  EXPECT_EQ(result(ge_warm.text), result(cold.text));
  EXPECT_EQ(entry_paths().size(), 2u);  // Model_dynamic_<h>/prompt and Model_dynamic_gecache_<h>/prompt
  struct stat st;
  ASSERT_EQ(::stat((dir / "cache.h5").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(CacheTest, ReduceOverheadEntryNamesAclgraphAndWarnsAboutGeCache) {
  Out o = sh(worker(dir, "prompt --reduce-overhead --ge-cache"));
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "ge_cache has no effect in reduce-overhead mode")) << o.text;
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
  EXPECT_TRUE(has(o.text, "is stale (runtime_version: stored 'simnpu-v1 runtime 1.0.0', now 'simnpu-v1 runtime 9.9.9')"))
      << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1\nstatus compiled\nreason stale (runtime_version")) << o.text;
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

TEST_F(CacheTest, CodeVersionFastPathSkipsTheTraceAndTrustsTheVersion) {
  ASSERT_EQ(sh(worker(dir, "prompt --fast --code-version v1")).status, 0);
  Out warm = sh(worker(dir, "prompt --fast --code-version v1"));
  EXPECT_TRUE(has(warm.text, "traced 0\ncompiled 0\nstatus hit")) << warm.text;  // no trace at all
  Out o = sh(worker(dir, "prompt --fast --code-version v2"));
  EXPECT_TRUE(has(o.text, "code_version: stored 'v1', now 'v2'")) << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1")) << o.text;
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
    cache::Hdf5Store store(dir);
    auto r = store.reader();
    auto e = *r->entry(entries[0]);
    auto obj = r->object(e.graph_key);
    e.meta.components["runtime_version"] = "simnpu-v1 runtime 0.0.1";
    cache::Hdf5Store::Transaction t;
    t.entries.push_back(e);
    store.commit(t);
  }
  Out o = sh(worker(dir, "prompt --code-version v1"));
  EXPECT_TRUE(has(o.text, "is stale (runtime_version: stored 'simnpu-v1 runtime 0.0.1', now 'simnpu-v1 runtime 1.0.0')"))
      << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1")) << o.text;
  EXPECT_TRUE(has(sh(worker(dir, "prompt --code-version v1")).text, "compiled 0"));  // replaced
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
  {  // overwrite the dynamic entry's object bytes, keeping its recorded checksum
    cache::Hdf5Store store(dir);
    auto r = store.reader();
    auto e = *r->entry(dyn);
    auto o = r->object(e.graph_key);
    cache::EntryRecord bad = e;
    bad.graph_key = e.graph_key + "x";
    cache::ObjectRecord junk = o;
    junk.graph_key = bad.graph_key;
    junk.raw = std::string(o.raw.size(), 'Z');
    cache::Hdf5Store::Transaction t;
    t.objects.push_back(junk);
    t.entries.push_back(bad);
    store.commit(t);
  }
  Out o = sh(worker(dir));
  EXPECT_TRUE(has(o.text, "is unusable")) << o.text;
  EXPECT_TRUE(has(o.text, "cannot be decoded")) << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1")) << o.text;
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0"));                   // rebuilt
  EXPECT_TRUE(has(sh(worker(dir, "prompt --static")).text, "compiled 0"));  // untouched
  // A truncated file: reported, started afresh.
  fs::resize_file(dir / "cache.h5", fs::file_size(dir / "cache.h5") / 3);
  Out t = sh(worker(dir));
  EXPECT_EQ(t.status, 0) << t.text;
  EXPECT_TRUE(has(t.text, "compiled 1")) << t.text;
  EXPECT_TRUE(has(t.text, "unreadable") || has(t.text, "unusable")) << t.text;
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0"));
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

TEST_F(CacheTest, H5dumpShowsTheLayoutAndThePluginDecodes) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(sh(worker(dir, "prompt --ge-cache")).status, 0);
  Out h = sh("h5dump -H -p " + (dir / "cache.h5").string());
  ASSERT_EQ(h.status, 0) << h.text;
  EXPECT_TRUE(has(h.text, "GROUP \"objects\"")) << h.text;
  EXPECT_TRUE(has(h.text, "GROUP \"prompt\"")) << h.text;
  EXPECT_TRUE(has(h.text, "DATASET \"compiled_module\"")) << h.text;
  EXPECT_TRUE(has(h.text, "HARDLINK \"/Model_dynamic_")) << h.text;  // stored once, linked
  EXPECT_TRUE(has(h.text, "ATTRIBUTE \"runtime_version\"")) << h.text;
  EXPECT_TRUE(has(h.text, "FILTER_ID 32015")) << h.text;
  auto entries = entry_paths();
  const std::string ds = "/" + entries[0] + "/compiled_module";
  Out plain = sh("HDF5_PLUGIN_PATH=/nonexistent h5dump -d " + ds + " " + (dir / "cache.h5").string());
  EXPECT_NE(plain.status, 0) << plain.text;  // without the plugin the bytes cannot be read
  Out decoded = sh(std::string("HDF5_PLUGIN_PATH=") + PLUGIN_DIR + " h5dump -d " + ds + " " + (dir / "cache.h5").string());
  EXPECT_EQ(decoded.status, 0) << decoded.text;
  EXPECT_TRUE(has(decoded.text, "DATA {")) << decoded.text;
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
    auto r = cache::Hdf5Store(dir).reader();
    if (!r) continue;  // killed before the first commit: no file at all
    auto entries = r->entries();
    EXPECT_GE(entries.size(), last) << "round " << round << ": entries were lost";
    last = entries.size();
    for (const auto& e : entries) EXPECT_NO_THROW(r->object(e.graph_key)) << e.path;
  }
  EXPECT_GT(last, 0u);
  // No temporary file of a killed writer survives the next commit.
  ASSERT_EQ(sh(std::string(CACHE_WORKER) + " write " + dir.string() + " final 1 100").status, 0);
  for (const auto& f : fs::directory_iterator(dir))
    EXPECT_FALSE(has(f.path().filename().string(), ".tmp.")) << f.path();
}

TEST_F(CacheTest, ConcurrentWritersLoseNoEntry) {
  Out a_b = sh(std::string("(") + CACHE_WORKER + " write " + dir.string() + " a 12 20000 & " + CACHE_WORKER + " write " +
               dir.string() + " b 12 20000 & wait)");
  ASSERT_EQ(a_b.status, 0) << a_b.text;
  auto paths = entry_paths();
  EXPECT_EQ(paths.size(), 24u);
}

TEST_F(CacheTest, SymlinkedOrForeignCacheIsRefused) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  fs::path real = dir / "real.h5";
  fs::rename(dir / "cache.h5", real);
  fs::create_symlink(real, dir / "cache.h5");
  try {
    cache::Hdf5Store(dir).reader();
    FAIL() << "a symlinked cache file was opened";
  } catch (const CacheError& e) {
    EXPECT_TRUE(has(e.what(), "is a symbolic link")) << e.what();
  }
  Out o = sh(worker(dir));
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "refusing to use")) << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1")) << o.text;  // ran uncached
  fs::remove(dir / "cache.h5");
  fs::rename(real, dir / "cache.h5");
  if (::geteuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  ASSERT_EQ(::chown((dir / "cache.h5").c_str(), 65534, 65534), 0);
  try {
    cache::Hdf5Store(dir).reader();
    FAIL() << "a foreign-owned cache file was opened";
  } catch (const CacheError& e) {
    EXPECT_TRUE(has(e.what(), "owned by uid 65534")) << e.what();
  }
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
  EXPECT_TRUE(has(gc.text, "evicted 2 of 2")) << gc.text;
  Out verify = sh(cli + " verify " + other.string());
  EXPECT_EQ(verify.status, 0) << verify.text;
  EXPECT_TRUE(has(sh(worker(other.string())).text, "compiled 1"));  // evicted: compiled again
  Out readable = sh(cli + " readable " + (other / cache::Hdf5Store(other).reader()->entries()[0].path).string());
  EXPECT_EQ(readable.status, 0) << readable.text;
  EXPECT_TRUE(has(readable.text, "## traced graph")) << readable.text;
  EXPECT_TRUE(has(readable.text, "linear(")) << readable.text;
  ASSERT_EQ(sh(cli + " clear " + other.string()).status, 0);
  EXPECT_FALSE(fs::exists(other / "cache.h5"));
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
  auto r = cache::Hdf5Store(other).reader();
  ASSERT_TRUE(r);
  bool found = false;
  for (const auto& e : r->entries()) found = found || has(e.path, "/decode");
  EXPECT_TRUE(found);
  fs::remove_all(other);
}
