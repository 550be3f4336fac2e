// The compile surface with a cache, across processes as a server restarts:
// automatic dynamic's decisions persist (seed 004's PGO cache), a damaged
// profile costs a compile and never a wrong result, torch.compile's modes
// through cache_compile.
#include <npucache/error.h>

#include "admin/admin.h"
#include "cache/serving_test.h"
#include "compiler/capture_template.h"
#include "format/names.h"
#include "format/profile_file.h"
#include "format/template_file.h"
#include "process/context.h"
#include "storage/gc.h"
#include "support/fault_env.h"
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

namespace fs = std::filesystem;
using npucache::testing_support::has;
using npucache::testing_support::Out;
using npucache::testing_support::sh;

// A server sees batch 1, 4 and 8 in every run: the first run compiles the
// static and the dynamic version, every later run compiles nothing.
TEST_F(Serving, AutomaticDynamicDecisionsPersistAcrossRestarts) {
  Out first = serve("--dynamic auto --batches 1,4,8");
  ASSERT_EQ(first.status, 0) << first.text;
  EXPECT_EQ(number(first.text, "compiles"), 2) << first.text;
  EXPECT_TRUE(has(first.text, "dynamic arg0 dim 0")) << first.text;
  EXPECT_LE(maxdiff(first.text), 1e-4) << first.text;
  EXPECT_TRUE(fs::exists(dir / npucache::format::names::kProfileFile));
  // `stats` counts both compiles: the first call's and automatic dynamic's.
  Out st = sh(std::string(NPUCACHE_CLI) + " stats " + dir.string());
  ASSERT_EQ(st.status, 0) << st.text;
  EXPECT_TRUE(has(st.text, "compiled         2:")) << st.text;
  for (int run = 0; run < 2; ++run) {
    Out warm = serve("--dynamic auto --batches 1,4,8");
    ASSERT_EQ(warm.status, 0) << warm.text;
    EXPECT_EQ(number(warm.text, "compiles"), 0) << warm.text;
    EXPECT_TRUE(has(warm.text, "call 1 hit")) << warm.text;
    EXPECT_LE(maxdiff(warm.text), 1e-4) << warm.text;
  }
  // The profile alone (entries and objects gone): the dynamic version is
  // compiled at once, once.
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != npucache::format::names::kProfileFile) fs::remove_all(e.path());
  Out profiled = serve("--dynamic auto --batches 1,4,8,16");
  ASSERT_EQ(profiled.status, 0) << profiled.text;
  EXPECT_EQ(number(profiled.text, "compiles"), 1) << profiled.text;
  EXPECT_LE(maxdiff(profiled.text), 1e-4) << profiled.text;
}

// A profile damaged at any of several offsets is warned about and ignored
// (one more compile), never a wrong result; the next save rewrites it.
TEST_F(Serving, DamagedProfileCostsACompileNeverAWrongResult) {
  ASSERT_EQ(serve("--dynamic auto --batches 4,8").status, 0);
  const fs::path profile = dir / npucache::format::names::kProfileFile;
  std::string clean;
  {
    std::ifstream in(profile, std::ios::binary);
    clean.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(clean.size(), 64u);
  for (std::size_t at : {std::size_t{3}, std::size_t{60}, clean.size() / 2, clean.size() - 2}) {
    std::string bad = clean;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_all);
    {
      std::ofstream out(profile, std::ios::binary);
      out << bad;
    }
    fs::permissions(profile, fs::perms::owner_read | fs::perms::owner_write);
    Out r = serve("--dynamic auto --batches 4,8");
    ASSERT_EQ(r.status, 0) << r.text;
    EXPECT_TRUE(has(r.text, "its dynamic-shape decisions are ignored")) << "offset " << at << "\n" << r.text;
    EXPECT_EQ(number(r.text, "compiles"), 2) << r.text;
    EXPECT_LE(maxdiff(r.text), 1e-4) << r.text;
    Out again = serve("--dynamic auto --batches 4,8");
    EXPECT_FALSE(has(again.text, "ignored")) << again.text;  // rewritten
    EXPECT_EQ(number(again.text, "compiles"), 0) << again.text;
  }
}

// The profile file's HDF5 view: one line per dynamic dim, per model_info.
TEST_F(Serving, H5dumpShowsTheProfile) {
  ASSERT_EQ(serve("--dynamic auto --batches 2,3").status, 0);
  Out d = sh("h5dump " + (dir / npucache::format::names::kProfileFile).string());
  ASSERT_EQ(d.status, 0) << d.text;
  EXPECT_TRUE(has(d.text, "dynamic_dims")) << d.text;
  EXPECT_TRUE(has(d.text, "\"forward: arg0 dim 0\"")) << d.text;
  EXPECT_TRUE(std::regex_search(d.text, std::regex("GROUP \"Server_auto_[0-9a-f]+\""))) << d.text;
}

// torch.compile's modes through cache_compile: a reduce-overhead entry is
// an aclgraphcache model_info, replays warm, and equals eager.
TEST_F(Serving, TorchCompileModesAreCached) {
  for (const char* args : {"--mode reduce-overhead", "--backend npugraphs", "--mode max-autotune-no-cudagraphs"}) {
    fs::remove_all(dir);
    Out cold = serve(std::string(args) + " --batches 4,4");
    ASSERT_EQ(cold.status, 0) << args << "\n" << cold.text;
    Out warm = serve(std::string(args) + " --batches 4,4");
    ASSERT_EQ(warm.status, 0) << warm.text;
    EXPECT_EQ(number(warm.text, "compiles"), 0) << args << "\n" << warm.text;
    EXPECT_LE(maxdiff(warm.text), 1e-4) << warm.text;
    const bool captures = std::string(args) != "--mode max-autotune-no-cudagraphs";
    EXPECT_EQ(has(warm.text, "call 4 hit 1"), captures) << args << "\n" << warm.text;
    bool acl = false;
    for (const auto& e : fs::directory_iterator(dir)) acl = acl || has(e.path().filename().string(), "aclgraphcache");
    EXPECT_EQ(acl, captures) << args;
  }
}

// cache_compile with fullgraph=false: the pieces between graph breaks are
// cached like whole graphs, so a restart compiles nothing; with fullgraph
// (the seed's default) the break is an error giving its reason.
TEST_F(Serving, PiecesBetweenGraphBreaksAreCached) {
  Out cold = serve("--breaks --dynamic auto --batches 4,4,6");
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_GE(number(cold.text, "compiles"), 2) << cold.text;
  EXPECT_TRUE(has(cold.text, "breaks 1")) << cold.text;
  EXPECT_LE(maxdiff(cold.text), 1e-4) << cold.text;
  Out warm = serve("--breaks --dynamic auto --batches 4,4,6");
  ASSERT_EQ(warm.status, 0) << warm.text;
  EXPECT_EQ(number(warm.text, "compiles"), 0) << warm.text;
  EXPECT_TRUE(has(warm.text, "call 4 hit")) << warm.text;
  EXPECT_LE(maxdiff(warm.text), 1e-4) << warm.text;
  // explain names the pieces the method is cached as.
  std::smatch m;
  Out ls = sh(std::string(NPUCACHE_CLI) + " ls " + dir.string());
  ASSERT_TRUE(std::regex_search(ls.text, m, std::regex("(Server_auto_[0-9a-f]+/branchy)\\.piece-[0-9a-f]{16}")))
      << ls.text;
  Out ex = sh(std::string(NPUCACHE_CLI) + " explain " + dir.string() + " --entry " + m[1].str());
  EXPECT_EQ(ex.status, 0) << ex.text;
  EXPECT_TRUE(has(ex.text, "graph breaks: " + m[1].str() + " is split into")) << ex.text;
  EXPECT_TRUE(has(ex.text, "verdict: the method has graph breaks")) << ex.text;
  Out strict = serve("--breaks --fullgraph --batches 4");
  EXPECT_NE(strict.status, 0) << strict.text;
  EXPECT_TRUE(has(strict.text, "graph break in Server.branchy at op sum")) << strict.text;
}

// A warmup without weights covers a method split at a graph break: prepare()
// obtains and stores its pieces without running them; without a hint it
// stops at the host read and says so, with the read's value hinted for each
// side of the branch it stores both sides -- so a serving start with real
// weights compiles nothing, in default and reduce-overhead mode (whose
// pieces' capture templates the warmup keeps too).
TEST_F(Serving, MetaWarmupOfASplitMethodStartsWarm) {
  for (const char* mode : {"default", "reduce-overhead"}) {
    SCOPED_TRACE(mode);
    fs::remove_all(dir);
    const std::string args = std::string("--breaks --batches 4,6 --mode ") + mode;
    Out warmup = serve(args + " --prepare");
    ASSERT_EQ(warmup.status, 0) << warmup.text;
    EXPECT_TRUE(has(warmup.text, "prepare 4 none partial pieces 1")) << warmup.text;
    EXPECT_TRUE(has(warmup.text, "stopped graph break 1 in Server.branchy at op sum")) << warmup.text;
    EXPECT_TRUE(has(warmup.text, "prepare 4 pos compiled pieces 2")) << warmup.text;
    EXPECT_TRUE(has(warmup.text, "prepare 4 neg compiled pieces 2")) << warmup.text;
    EXPECT_TRUE(has(warmup.text, "prepare 6 neg compiled pieces 2")) << warmup.text;
    // The piece before the read and one on each side of it, each general in
    // the batch (dynamic=true, cache_compile's default, makes a piece's sizes
    // symbolic from the start): batch 6 reuses batch 4's pieces.
    EXPECT_EQ(number(warmup.text, "compiles"), 3) << warmup.text;
    // Serving (real weights, both sides of the branch taken: the inputs'
    // sum changes sign with the batch's values) compiles nothing.
    for (const char* weights : {"1", "-1"}) {
      Out serving = serve(args + " --weights " + weights);
      ASSERT_EQ(serving.status, 0) << serving.text;
      EXPECT_EQ(number(serving.text, "compiles"), 0) << serving.text;
      EXPECT_TRUE(has(serving.text, "call 4 hit")) << serving.text;
      EXPECT_TRUE(has(serving.text, "call 6 hit")) << serving.text;
      EXPECT_LE(maxdiff(serving.text), 1e-4) << serving.text;
      if (std::string(mode) == "reduce-overhead") {  // the pieces' templates restored, none captured
        EXPECT_EQ(number(serving.text, "templates recorded"), 0) << serving.text;
        EXPECT_GE(number(serving.text, "restored"), 2) << serving.text;
      }
    }
  }
}

// Pieces of one structure over other layers (a host read after each
// same-shaped layer) are other programs: each runs its own parameters when
// compiled, and is stored and loaded as an entry of its own.
TEST_F(Serving, PiecesOfOneStructureReadingOtherParametersAreCachedApart) {
  for (const char* mode : {"default", "reduce-overhead"}) {
    SCOPED_TRACE(mode);
    fs::remove_all(dir);
    const std::string args = std::string("--routed --batches 4,4 --mode ") + mode;
    Out cold = serve(args);
    ASSERT_EQ(cold.status, 0) << cold.text;
    // Four pieces (3 layers, the scaling after them), two structures: the
    // second and third layers' pieces bind the first's stored object to
    // their own parameters.
    EXPECT_EQ(number(cold.text, "compiles"), 2) << cold.text;
    EXPECT_LE(maxdiff(cold.text), 1e-5) << cold.text;
    Out warm = serve(args);
    ASSERT_EQ(warm.status, 0) << warm.text;
    EXPECT_EQ(number(warm.text, "compiles"), 0) << warm.text;
    EXPECT_LE(maxdiff(warm.text), 1e-5) << warm.text;
    Out ls = sh(std::string(NPUCACHE_CLI) + " ls " + dir.string());
    std::set<std::string> pieces;
    const std::regex piece("routed\\.piece-[0-9a-f]{16}");
    for (auto it = std::sregex_iterator(ls.text.begin(), ls.text.end(), piece); it != std::sregex_iterator(); ++it)
      pieces.insert(it->str());
    EXPECT_EQ(pieces.size(), 4u) << ls.text;
  }
}

// The pieces of a cache of the previous formats (tests/fixtures/format-10.0.0/, 9.0.0/, 8.0.0/,
// format-7.0.0/, format-6.0.0/ and format-5.0.0/ breaks; 5.0.0's were keyed without the
// parameters they read) are reported stale and rebuilt, never served; the
// old files are left as they were (the dynamic-shape profiles, a table of
// the directory, gain this format's records and keep the earlier ones).
TEST_F(Serving, PreviousFormatPiecesAreRebuiltNeverServed) {
  for (const std::string version : {"10.0.0", "9.0.0", "8.0.0", "7.0.0", "6.0.0", "5.0.0"}) {
    const fs::path fixture = fs::path(FIXTURES) / ("format-" + version) / "breaks";
    const fs::path d = dir.string() + "-" + version;
    fs::copy(fixture, d, fs::copy_options::recursive);
    for (const auto& f : fs::recursive_directory_iterator(d))
      fs::permissions(f.path(), fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove);
    fs::permissions(d, fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove);
    const std::string run = std::string(SERVE_WORKER) + " " + d.string() + " --breaks --dynamic auto --batches 4,4,6";
    Out old = sh(run);
    ASSERT_EQ(old.status, 0) << version << ": " << old.text;
    EXPECT_EQ(number(old.text, "compiles"), 4) << version << ": " << old.text;  // as cold: before and after the break
    EXPECT_FALSE(has(old.text, "call 4 hit")) << version << ": " << old.text;
    EXPECT_LE(maxdiff(old.text), 1e-4) << version << ": " << old.text;
    for (const auto& f : fs::recursive_directory_iterator(fixture)) {
      if (!f.is_regular_file() || f.path().extension() != ".h5") continue;
      std::ifstream a(f.path(), std::ios::binary), b(d / fs::relative(f.path(), fixture), std::ios::binary);
      const std::string x{std::istreambuf_iterator<char>(a), {}}, y{std::istreambuf_iterator<char>(b), {}};
      if (f.path().filename() == npucache::format::names::kProfileFile) {
        const auto now = npucache::format::decode_profiles(y, "profiles");
        for (const auto& r : npucache::format::decode_profiles(x, "fixture profiles"))
          EXPECT_NE(std::find(now.begin(), now.end(), r), now.end())
              << r.model_info << " " << r.method << ": a profile of format " << version << " was lost";
        continue;
      }
      EXPECT_EQ(x, y) << f.path() << " of format " << version << " was rewritten";
    }
    Out warm = sh(run);
    EXPECT_EQ(number(warm.text, "compiles"), 0) << version << ": " << warm.text;
    EXPECT_LE(maxdiff(warm.text), 1e-4) << version << ": " << warm.text;
  }
}

namespace {
// Runs the commands at once; their exit statuses and outputs.
std::vector<Out> in_parallel(const std::vector<std::string>& cmds, const fs::path& scratch) {
  std::string all;
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    const std::string log = (scratch / ("run-" + std::to_string(i))).string();
    all += "(" + cmds[i] + " > " + log + ".log 2>&1; echo $? > " + log + ".rc) & ";
  }
  sh(all + "wait");
  std::vector<Out> out;
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    const fs::path log = scratch / ("run-" + std::to_string(i));
    Out o;
    std::ifstream text(log.string() + ".log"), rc(log.string() + ".rc");
    o.text.assign(std::istreambuf_iterator<char>(text), {});
    if (!(rc >> o.status)) o.status = -1;
    out.push_back(std::move(o));
  }
  return out;
}

// The model_info directory serve_worker's model has in `dir` ("Server_auto_<hash>").
std::string model_info_in(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".h5" && has(e.path().filename().string(), "Server_"))
      return e.path().stem().string();
  return "";
}
}  // namespace

// Something else than a file at profiles.h5 -- a directory, a symbolic
// link to a file elsewhere, a FIFO -- is refused: the server runs, never
// waits on it, gives eager's results and leaves the plant as it was.
TEST_F(Serving, PlantsAtTheProfilePathAreRefused) {
  const fs::path profile = dir / npucache::format::names::kProfileFile;
  const fs::path outside = fs::path(dir.string() + "-outside");
  for (const char* plant : {"directory", "symlink", "fifo"}) {
    fs::remove_all(dir);
    fs::remove_all(outside);
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_all);
    fs::create_directories(outside);
    const std::string plant_name = plant;
    if (plant_name == "directory") {
      fs::create_directories(profile);
    } else if (plant_name == "symlink") {
      { std::ofstream(outside / "target") << "not a profile"; }
      fs::create_symlink(outside / "target", profile);
    } else {
      ASSERT_EQ(::mkfifo(profile.c_str(), 0600), 0);
    }
    for (int run = 0; run < 2; ++run) {
      Out r = sh("timeout 60 " + std::string(SERVE_WORKER) + " " + dir.string() + " --dynamic auto --batches 4,8");
      ASSERT_EQ(r.status, 0) << plant << "\n" << r.text;
      EXPECT_LE(maxdiff(r.text), 1e-4) << plant << "\n" << r.text;
    }
    if (plant_name == "directory") {
      EXPECT_TRUE(fs::is_directory(profile));
    } else if (plant_name == "symlink") {
      EXPECT_TRUE(fs::is_symlink(profile));
      std::ifstream in(outside / "target");
      std::string text((std::istreambuf_iterator<char>(in)), {});
      EXPECT_EQ(text, "not a profile");
    } else {
      EXPECT_TRUE(fs::is_fifo(profile));
    }
  }
  fs::remove_all(outside);
}

// A well-formed profile of hostile content -- dims past an input's rank, a
// dim the model fixes (the feature dim a weight decides), inputs the method
// does not have, another model's records -- costs no wrong result and no
// error.
TEST_F(Serving, CraftedProfileNeverChangesResults) {
  ASSERT_EQ(serve("--dynamic auto --batches 4").status, 0);
  const std::string info = model_info_in(dir);
  ASSERT_FALSE(info.empty());
  using npucache::format::ProfileRecord;
  std::vector<ProfileRecord> records = {
      {info, "forward", {"arg0", 63}},  {info, "forward", {"arg0", 1}}, {info, "forward", {"arg9", 0}},
      {info, "forward", {"arg0.x", 0}}, {info, "other", {"arg0", 0}},   {"Server_auto_0000", "forward", {"arg0", 0}},
  };
  std::sort(records.begin(), records.end());
  for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
  {
    std::ofstream out(dir / npucache::format::names::kProfileFile, std::ios::binary);
    out << npucache::format::encode_profiles(records);
  }
  fs::permissions(dir / npucache::format::names::kProfileFile, fs::perms::owner_read | fs::perms::owner_write);
  for (int run = 0; run < 2; ++run) {
    Out r = serve("--dynamic auto --batches 1,4,8,3");
    ASSERT_EQ(r.status, 0) << r.text;
    EXPECT_LE(maxdiff(r.text), 1e-4) << r.text;
    EXPECT_FALSE(has(r.text, "ignored")) << r.text;
  }
}

// Servers of several methods starting at once on one cache directory: each
// one's profile decision is kept (none lost to another's rewrite), and the
// directory verifies clean.
TEST_F(Serving, ConcurrentProfileWritersLoseNoDims) {
  constexpr int kServers = 4;
  std::vector<std::string> cmds;
  for (int k = 0; k < kServers; ++k)
    cmds.push_back(std::string(SERVE_WORKER) + " " + dir.string() + " --dynamic auto --batches 2,3 --method m" +
                   std::to_string(k));
  const fs::path scratch = dir.string() + "-logs";
  fs::create_directories(scratch);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  for (const Out& r : in_parallel(cmds, scratch)) {
    EXPECT_EQ(r.status, 0) << r.text;
    EXPECT_LE(maxdiff(r.text), 1e-4) << r.text;
  }
  fs::remove_all(scratch);
  Out d = sh("h5dump -d /" + model_info_in(dir) + "/dynamic_dims " +
             (dir / npucache::format::names::kProfileFile).string());
  ASSERT_EQ(d.status, 0) << d.text;
  for (int k = 0; k < kServers; ++k) EXPECT_TRUE(has(d.text, "\"m" + std::to_string(k) + ": arg0 dim 0\"")) << d.text;
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  // Every server's decision serves the next start: no compile at all.
  for (int k = 0; k < kServers; ++k) {
    Out warm = serve("--dynamic auto --batches 2,3,9 --method m" + std::to_string(k));
    EXPECT_EQ(number(warm.text, "compiles"), 0) << warm.text;
  }
}

// A server killed (SIGKILL) at various moments while it saves profiles and
// entries: the profile it leaves is the previous one or the new one, never
// a damaged one, and the next server is right.
TEST_F(Serving, KilledWhileSavingProfilesLeavesThemValid) {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  int profiles_seen = 0;
  const std::vector<std::string> kill_after = {"0.4", "0.8", "1.2", "1.6", "2.0"};
  for (std::size_t i = 0; i < kill_after.size(); ++i) {
    const std::string& after = kill_after[i];
    Out killed = sh("timeout -s KILL " + after + " " + std::string(SERVE_WORKER) + " " + dir.string() +
                    " --dynamic auto --batches 2,3 --methods 60 --method k" + std::to_string(i));
    if (fs::exists(dir / npucache::format::names::kProfileFile)) ++profiles_seen;
    Out r = serve("--dynamic auto --batches 2,3");
    ASSERT_EQ(r.status, 0) << "killed after " << after << " s\n" << killed.text << r.text;
    EXPECT_FALSE(has(r.text, "ignored")) << "killed after " << after << " s\n" << r.text;
    EXPECT_FALSE(has(r.text, "damaged")) << "killed after " << after << " s\n" << r.text;
    EXPECT_LE(maxdiff(r.text), 1e-4) << r.text;
  }
  EXPECT_GT(profiles_seen, 0);
  Out v = sh(std::string(NPUCACHE_CLI) + " verify --repair " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  Out again = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(again.status, 0) << again.text;
}

// A reduce-overhead server restarted warm -- with other weight values, with
// graph breaks, with automatic dynamic -- restores its captures from the
// cache's templates bound to the weights it has now (or captures them in its
// own process): every result equals eager with those weights.
TEST_F(Serving, WarmRestartOfAReduceOverheadServerIsNeverStale) {
  for (const char* args :
       {"--mode reduce-overhead --batches 4,4,6,4", "--mode reduce-overhead --breaks --batches 4,4,6",
        "--mode reduce-overhead --dynamic auto --batches 2,4,8,4", "--backend npugraphs --breaks --batches 4,5,4"}) {
    fs::remove_all(dir);
    for (const char* scale : {"1", "2", "-0.5", "1"}) {
      Out r = serve(std::string(args) + " --weights " + scale);
      ASSERT_EQ(r.status, 0) << args << " scale " << scale << "\n" << r.text;
      EXPECT_LE(maxdiff(r.text), 1e-4) << args << " scale " << scale << "\n" << r.text;
    }
    Out warm = serve(std::string(args) + " --weights 3");
    EXPECT_EQ(number(warm.text, "compiles"), 0) << args << "\n" << warm.text;
  }
}

// Random small models with random graph breaks and SymInts, random modes and
// dynamic settings, run by several processes at once on one cache directory
// (two of them the same model, the others other models of the same class),
// cold and warm: every result equals eager, whatever each process found in
// the cache; the directory verifies clean.
TEST_F(Serving, RandomSplitModelsAcrossProcessesEqualEager) {
  const fs::path scratch = dir.string() + "-logs";
  fs::create_directories(scratch);
  for (unsigned round = 0; round < 3; ++round) {
    std::vector<std::string> cmds;
    for (unsigned seed : {round * 3 + 1, round * 3 + 2, round * 3 + 3, round * 3 + 1})
      cmds.push_back(std::string(SURFACE_DIFF_WORKER)
                         .append(" ")
                         .append(dir.string())
                         .append(" ")
                         .append(std::to_string(seed))
                         .append(" 6"));
    for (int start = 0; start < 2; ++start)
      for (const Out& r : in_parallel(cmds, scratch)) {
        EXPECT_EQ(r.status, 0) << "round " << round << "\n" << r.text;
        EXPECT_LE(maxdiff(r.text), 1e-4) << "round " << round << "\n" << r.text;
      }
  }
  fs::remove_all(scratch);
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
}

// Six device kinds starting at once on one cache, twice (variants written
// and the bound's removals racing): every result equals eager, verify finds
// the cache clean, at most four variants are left, and a kind whose
// variant is kept then starts without capturing.
TEST_F(Serving, DeviceKindsStartingAtOnceLeaveAValidBoundedCache) {
  const std::string args = " --mode reduce-overhead --dynamic true --batches 4";
  ASSERT_EQ(serve(args).status, 0);  // the object, stored once
  const fs::path scratch = dir.string() + "-logs";
  fs::create_directories(scratch);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> cmds;
    for (int gib = 1; gib <= 6; ++gib)
      cmds.push_back("NPUCACHE_SIM_DEVICE_MEMORY=" + std::to_string(gib) + "G " + std::string(SERVE_WORKER) + " " +
                     dir.string() + args);
    for (const Out& r : in_parallel(cmds, scratch)) {
      EXPECT_EQ(r.status, 0) << r.text;
      EXPECT_LE(maxdiff(r.text), 1e-6) << r.text;
    }
  }
  fs::remove_all(scratch);
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  std::vector<int> kept;
  for (const auto& e : fs::directory_iterator(dir / npucache::format::names::kTemplatesDir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    kept.push_back(static_cast<int>(
        npucache::format::decode_template_file(bytes, e.path().string()).validity.device_memory >> 30));
  }
  EXPECT_LE(kept.size(), 4u);
  ASSERT_FALSE(kept.empty());
  Out again = sh("NPUCACHE_SIM_DEVICE_MEMORY=" + std::to_string(kept.front()) + "G " + std::string(SERVE_WORKER) + " " +
                 dir.string() + args);
  EXPECT_TRUE(has(again.text, "templates recorded 0 restored 1 recaptured 0")) << again.text;
}
