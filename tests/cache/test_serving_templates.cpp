// A reduce-overhead server's captured graphs in the cache, across
// processes: a warm start captures nothing, templates of two device kinds
// side by side, variants bounded per program, damaged, crafted and
// orphaned template files never replayed, a kill mid-save harmless.
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

// Captured graphs in the cache (reduce-overhead): a warm start restores
// every capture from its template instead of capturing; so does a cache
// filled from a bundle; results equal eager.
TEST_F(Serving, WarmReduceOverheadStartCapturesNothing) {
  const std::string args = "--mode reduce-overhead --dynamic true --batches 4,8,4,16,2";
  Out cold = serve(args);
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_TRUE(has(cold.text, "templates recorded 4 restored 0 recaptured 0")) << cold.text;
  // The warm process writes its metrics file (at exit, at the latest).
  const fs::path metrics = dir.string() + "-metrics.prom";
  fs::remove(metrics);
  Out warm = sh("NPUCACHE_METRICS_FILE=" + metrics.string() + " " + std::string(SERVE_WORKER) + " " + dir.string() +
                " " + args);
  ASSERT_EQ(warm.status, 0) << warm.text;
  EXPECT_EQ(number(warm.text, "compiles"), 0) << warm.text;
  EXPECT_TRUE(has(warm.text, "templates recorded 0 restored 4 recaptured 0")) << warm.text;
  EXPECT_LE(maxdiff(warm.text), 1e-6) << warm.text;
  // `stats` carries what the two processes captured and restored.
  Out st = sh(std::string(NPUCACHE_CLI) + " stats " + dir.string());
  EXPECT_TRUE(has(st.text, "captures         4 recorded, 4 restored from templates, 0 recaptured")) << st.text;
  Out check = sh("promtool check metrics < " + metrics.string() + " && cat " + metrics.string());
  EXPECT_EQ(check.status, 0) << check.text;
  EXPECT_TRUE(has(check.text, "npucache_captures_total{kind=\"restored\"} 4\n")) << check.text;
  EXPECT_TRUE(has(check.text, "npucache_captures_total{kind=\"recorded\"} 0\n")) << check.text;
  EXPECT_TRUE(has(check.text, "npucache_compiles_total 0\n")) << check.text;
  fs::remove(metrics);
  const fs::path bundle = dir.string() + ".bundle", other = dir.string() + "-imported";
  fs::remove_all(other);
  Out ex = sh(std::string(NPUCACHE_CLI) + " export " + dir.string() + " -o " + bundle.string());
  ASSERT_EQ(ex.status, 0) << ex.text;
  EXPECT_TRUE(has(ex.text, "4 capture templates")) << ex.text;
  ASSERT_EQ(sh(std::string(NPUCACHE_CLI) + " import " + bundle.string() + " " + other.string()).status, 0);
  Out imported = sh(std::string(SERVE_WORKER) + " " + other.string() + " " + args);
  EXPECT_TRUE(has(imported.text, "templates recorded 0 restored 4 recaptured 0")) << imported.text;
  EXPECT_LE(maxdiff(imported.text), 1e-6) << imported.text;
  fs::remove_all(other);
  fs::remove(bundle);
}

// What a template is valid for is checked: another device memory size is a
// recapture with the reason, and the recapture replaces the template.
TEST_F(Serving, AnInvalidatingDifferenceIsARecaptureWithItsReason) {
  ASSERT_EQ(serve("--mode reduce-overhead --dynamic true --batches 4").status, 0);
  Out other = sh("NPUCACHE_SIM_DEVICE_MEMORY=8G " + std::string(SERVE_WORKER) + " " + dir.string() +
                 " --mode reduce-overhead --dynamic true --batches 4");
  ASSERT_EQ(other.status, 0) << other.text;
  EXPECT_TRUE(has(other.text, "templates recorded 1 restored 0 recaptured 1")) << other.text;
  EXPECT_TRUE(has(other.text, "recaptured: device memory: stored '4294967296', now '8589934592'")) << other.text;
  EXPECT_LE(maxdiff(other.text), 1e-6) << other.text;
  Out again = sh("NPUCACHE_SIM_DEVICE_MEMORY=8G " + std::string(SERVE_WORKER) + " " + dir.string() +
                 " --mode reduce-overhead --dynamic true --batches 4");
  EXPECT_TRUE(has(again.text, "templates recorded 0 restored 1 recaptured 0")) << again.text;
}

// Two kinds of device (other memory sizes) alternating on one cache keep
// their captured graphs side by side: every start after a kind's first
// restores all of its captures. The first start of the second kind
// recaptures with the reason, logged once, counted by reason in `stats`.
TEST_F(Serving, TwoDeviceKindsKeepTheirTemplatesSideBySide) {
  auto on = [&](const std::string& memory) {
    return sh("NPUCACHE_SIM_DEVICE_MEMORY=" + memory + " " + std::string(SERVE_WORKER) + " " + dir.string() +
              " --mode reduce-overhead --dynamic true --batches 4,8");
  };
  Out a = on("4G");
  ASSERT_EQ(a.status, 0) << a.text;
  EXPECT_TRUE(has(a.text, "templates recorded 2 restored 0 recaptured 0")) << a.text;
  Out b = on("8G");
  ASSERT_EQ(b.status, 0) << b.text;
  EXPECT_TRUE(has(b.text, "templates recorded 2 restored 0 recaptured 2")) << b.text;
  const std::string said = "recaptured a captured graph: device memory: stored '4294967296', now '8589934592'";
  ASSERT_TRUE(has(b.text, said)) << b.text;
  EXPECT_FALSE(has(b.text.substr(b.text.find(said) + said.size()), "recaptured a captured graph")) << b.text;
  for (int round = 0; round < 2; ++round)
    for (const std::string memory : {"4G", "8G"}) {
      Out r = on(memory);
      ASSERT_EQ(r.status, 0) << r.text;
      EXPECT_TRUE(has(r.text, "templates recorded 0 restored 2 recaptured 0")) << memory << " round " << round << "\n"
                                                                               << r.text;
      EXPECT_LE(maxdiff(r.text), 1e-6) << r.text;
    }
  Out st = sh(std::string(NPUCACHE_CLI) + " stats " + dir.string());
  EXPECT_TRUE(has(st.text, "captures         4 recorded, 8 restored from templates, 2 recaptured (2 device_memory)"))
      << st.text;
  Out js = sh(std::string(NPUCACHE_CLI) + " stats " + dir.string() + " --format json");
  EXPECT_TRUE(std::regex_search(js.text, std::regex("\"recaptures_by_reason\": \\{\\s*\"device_memory\": 2")))
      << js.text;
  // A file planted under one kind's name with the other's content does not
  // name its content: reported by verify, never replayed.
  const std::vector<fs::path> files = template_files();
  ASSERT_EQ(files.size(), 4u);
  std::string planted;
  fs::path victim;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    const auto rec = npucache::format::decode_template_file(bytes, f.string());
    if (rec.validity.device_memory == (uint64_t{8} << 30) && planted.empty()) planted = bytes;
    if (rec.validity.device_memory == (uint64_t{4} << 30)) victim = f;
  }
  ASSERT_FALSE(planted.empty());
  ASSERT_FALSE(victim.empty());
  {
    std::ofstream out(victim, std::ios::binary | std::ios::trunc);
    out << planted;
  }
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 1) << v.text;
  EXPECT_TRUE(has(v.text, "its name is not its content's key")) << v.text;
  Out r = on("4G");
  ASSERT_EQ(r.status, 0) << r.text;
  EXPECT_TRUE(has(r.text, "recaptured 1")) << r.text;
  EXPECT_LE(maxdiff(r.text), 1e-6) << r.text;
}

// The variants kept per program and sizes are bounded: six kinds of device
// in turn leave four files, the least recently written go, and the kinds
// still kept start without capturing.
TEST_F(Serving, TemplateVariantsAreBoundedPerProgram) {
  auto on = [&](int gib) {
    return sh("NPUCACHE_SIM_DEVICE_MEMORY=" + std::to_string(gib) + "G " + std::string(SERVE_WORKER) + " " +
              dir.string() + " --mode reduce-overhead --dynamic true --batches 4");
  };
  for (int gib = 1; gib <= 6; ++gib) {
    Out r = on(gib);
    ASSERT_EQ(r.status, 0) << r.text;
    EXPECT_TRUE(has(r.text, "templates recorded 1 restored 0")) << gib << "G\n" << r.text;
  }
  const std::vector<fs::path> files = template_files();
  EXPECT_EQ(files.size(), 4u);
  for (const auto& f : files) EXPECT_TRUE(fs::is_regular_file(f)) << f;
  for (int gib : {3, 4, 5, 6}) EXPECT_TRUE(has(on(gib).text, "templates recorded 0 restored 1")) << gib << "G";
  EXPECT_TRUE(has(on(1).text, "templates recorded 1 restored 0")) << "1G was removed";
  EXPECT_EQ(sh(std::string(NPUCACHE_CLI) + " verify " + dir.string()).status, 0);
}

// The bound removes the least recently used variant, not the least recently
// written: a kind restored since its file was written keeps it.
TEST_F(Serving, TemplateVariantsBoundKeepsTheRecentlyRestored) {
  auto on = [&](int gib) {
    return sh("NPUCACHE_SIM_DEVICE_MEMORY=" + std::to_string(gib) + "G " + std::string(SERVE_WORKER) + " " +
              dir.string() + " --mode reduce-overhead --dynamic true --batches 4");
  };
  for (int gib = 1; gib <= 4; ++gib) ASSERT_TRUE(has(on(gib).text, "templates recorded 1 restored 0")) << gib << "G";
  EXPECT_TRUE(has(on(1).text, "templates recorded 0 restored 1"));
  EXPECT_TRUE(has(on(5).text, "templates recorded 1 restored 0"));  // removes 2G's, the least recently used
  EXPECT_TRUE(has(on(1).text, "templates recorded 0 restored 1")) << "1G was removed";
  EXPECT_TRUE(has(on(2).text, "templates recorded 1 restored 0")) << "2G was kept";
}

// A template file of an earlier build of this format (named by its program
// and sizes alone) is still restored where it is valid.
TEST_F(Serving, AnEarlierBuildsTemplateFileIsRestored) {
  const std::string args = "--mode reduce-overhead --dynamic true --batches 4";
  ASSERT_EQ(serve(args).status, 0);
  const std::vector<fs::path> files = template_files();
  ASSERT_EQ(files.size(), 1u);
  const fs::path file = files.front();
  const std::string name = file.filename().string();
  ASSERT_EQ(name.size(), 32u + 1 + 16 + 3) << name;  // <template key>.<variant>.h5
  fs::rename(file, file.parent_path() / (name.substr(0, 32) + ".h5"));
  Out r = serve(args);
  ASSERT_EQ(r.status, 0) << r.text;
  EXPECT_TRUE(has(r.text, "templates recorded 0 restored 1 recaptured 0")) << r.text;
  EXPECT_EQ(sh(std::string(NPUCACHE_CLI) + " verify " + dir.string()).status, 0);
}

// The templates made for a newer program of shapes captured before are not
// the user's captures: with capture_limit 3 and batches 1, 3, 8 under
// automatic dynamic, batch 8 is captured and replayed (no "reached its
// capture limit"), and status().captures counts the three calls' captures.
TEST_F(Serving, TemplatesOfEarlierShapesDrawNoCaptureBudget) {
  Out r = serve("--mode reduce-overhead --dynamic auto --batches 1,3,8 --capture-limit 3");
  ASSERT_EQ(r.status, 0) << r.text;
  EXPECT_TRUE(std::regex_search(r.text, std::regex("call 8 [a-z]+ 1 "))) << r.text;
  EXPECT_FALSE(has(r.text, "capture limit")) << r.text;
  EXPECT_EQ(number(r.text, "captures"), 3) << r.text;
  EXPECT_LE(maxdiff(r.text), 1e-4) << r.text;
}

// Request threads of batch 1, 3 and 8 running reduce-overhead decode loops
// under automatic dynamic: whichever program each thread's calls ran on in
// the first start (the threads' timing decides: all at once, or one after
// another, when the batch-1 thread ends on the program with only the KV
// length dynamic), the second start restores every capture and captures
// nothing, on every fresh cache (NPUCACHE_DECODE_CACHES of them, 3 by
// default; scripts/long.sh runs 20).
TEST_F(Serving, ThreadedDecodeSecondStartCapturesNothing) {
  const char* n = std::getenv("NPUCACHE_DECODE_CACHES");
  const int caches = n ? std::atoi(n) : 3;
  const std::string args = " --mode reduce-overhead --dynamic auto --decode-threads 6 --batches 1,3,8";
  for (int k = 0; k < caches; ++k) {
    const fs::path d = dir / ("cache" + std::to_string(k));
    Out first = sh(std::string(SERVE_WORKER) + " " + d.string() + args + (k % 2 == 0 ? " --one-by-one" : ""));
    ASSERT_EQ(first.status, 0) << first.text;
    EXPECT_LE(maxdiff(first.text), 1e-4) << first.text;
    Out second = sh(std::string(SERVE_WORKER) + " " + d.string() + args);
    ASSERT_EQ(second.status, 0) << second.text;
    EXPECT_TRUE(has(second.text, "templates recorded 0 ")) << "cache " << k << "\nfirst:\n"
                                                           << first.text << "second:\n"
                                                           << second.text;
    EXPECT_EQ(number(second.text, "compiles"), 0) << second.text;
    EXPECT_LE(maxdiff(second.text), 1e-4) << second.text;
  }
}

// A template damaged at any of several offsets, or crafted with valid
// checksums but an operand outside the pool, is reported and recaptured,
// never replayed; verify names it and --repair removes it.
TEST_F(Serving, DamagedAndCraftedTemplatesAreNeverReplayed) {
  const std::string args = "--mode reduce-overhead --dynamic true --batches 4";
  ASSERT_EQ(serve(args).status, 0);
  const std::vector<fs::path> files = template_files();
  ASSERT_EQ(files.size(), 1u);
  const fs::path file = files.front();
  std::string clean;
  {
    std::ifstream in(file, std::ios::binary);
    clean.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto put = [&](const std::string& bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << bytes;
  };
  for (std::size_t at : {std::size_t{5}, std::size_t{70}, clean.size() / 3, clean.size() / 2, clean.size() - 3}) {
    std::string bad = clean;
    bad[at] = static_cast<char>(bad[at] ^ 0x21);
    put(bad);
    Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
    EXPECT_EQ(v.status, 1) << "offset " << at << "\n" << v.text;
    Out r = serve(args);
    ASSERT_EQ(r.status, 0) << r.text;
    EXPECT_TRUE(has(r.text, "templates recorded 1 restored 0 recaptured 1")) << "offset " << at << "\n" << r.text;
    EXPECT_TRUE(has(r.text, "damaged")) << r.text;
    EXPECT_LE(maxdiff(r.text), 1e-6) << r.text;
  }
  // Crafted: sealed as npucache seals, one operand moved past the pool.
  npucache::format::TemplateRecord rec = npucache::format::decode_template_file(clean, "template");
  npucache::compiler::CaptureTemplate t = npucache::compiler::decode_template(rec.bytes);
  ASSERT_FALSE(t.tasks.empty());
  t.tasks.back().operands.back().offset = t.footprint + 4096;
  rec.bytes = npucache::compiler::encode_template(t);
  rec.fingerprint = npucache::compiler::template_fingerprint(t);
  put(npucache::format::encode_template_file(rec));
  Out crafted = serve(args);
  ASSERT_EQ(crafted.status, 0) << crafted.text;
  EXPECT_TRUE(has(crafted.text, "recaptured 1")) << crafted.text;
  EXPECT_TRUE(has(crafted.text, "differs from the program's step")) << crafted.text;
  EXPECT_LE(maxdiff(crafted.text), 1e-6) << crafted.text;
  // An orphan (its object gone) is reported by verify and removed by --repair.
  for (const auto& e : fs::directory_iterator(dir / "objects")) fs::remove(e.path());
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string() + " --repair");
  EXPECT_TRUE(has(v.text, "the template can never be used")) << v.text;
  EXPECT_TRUE(fs::is_empty(dir / npucache::format::names::kTemplatesDir)) << v.text;
}

// A gc or clear stopped at any file removal (killed, or an I/O error: the
// nth removal fails and the sweep stops there) leaves no capture template
// naming a missing object: templates go before their objects, so what a
// stopped sweep leaves is at most objects no entry uses, which the next gc
// collects, and verify of a busy, healthy cache stays clean.
TEST_F(Serving, SweepStoppedAtAnyRemovalLeavesNoTemplateOfAMissingObject) {
  using npucache::testing_support::Fault;
  using npucache::testing_support::FaultEnv;
  using npucache::testing_support::FileOp;
  namespace names = npucache::format::names;
  const Out made = serve("--mode reduce-overhead --breaks --batches 2,4");
  ASSERT_EQ(made.status, 0) << made.text;
  ASSERT_TRUE(fs::exists(dir / names::kTemplatesDir)) << made.text;
  std::size_t made_files = 0;
  for (const char* sub : {names::kObjectsDir, names::kTemplatesDir})
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / sub)) ++made_files;
  ASSERT_GE(made_files, 3u) << made.text;  // an object and two templates at least
  const fs::path pristine = dir.string() + ".pristine";
  fs::copy(dir, pristine, fs::copy_options::recursive);
  // Each template's object is there (a template alone can never be used).
  auto orphaned_templates = [&] {
    std::vector<std::string> out;
    if (!fs::exists(dir / names::kTemplatesDir)) return out;
    for (const auto& e : fs::directory_iterator(dir / names::kTemplatesDir)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), {}};
      const auto r = npucache::format::decode_template_file(bytes, e.path().string());
      if (!fs::exists(dir / names::kObjectsDir / names::object_file(r.validity.graph_key)))
        out.push_back(e.path().filename().string());
    }
    return out;
  };
  for (const std::string sweep : {"gc", "clear"}) {
    bool finished = false;
    std::size_t stops = 0;  // the removals the sweep was stopped at
    for (std::size_t nth = 1; !finished && nth < 400; ++nth) {
      fs::remove_all(dir);
      fs::copy(pristine, dir, fs::copy_options::recursive);
      {
        auto env = std::make_shared<FaultEnv>();
        npucache::process::Context::Scope scope(env);
        env->arm(Fault::fail(FileOp::unlink, nth, EIO));
        try {
          if (sweep == "gc") {
            npucache::storage::GcOptions o;
            o.models = {"Server"};
            (void)npucache::storage::gc(dir.string(), o);
          } else {
            (void)npucache::cache::admin::clear(dir.string());
          }
        } catch (const npucache::Error&) {
        }
        finished = env->faulted().empty();
        stops += finished ? 0 : 1;
      }
      const auto left = orphaned_templates();
      EXPECT_TRUE(left.empty()) << sweep << " stopped at removal " << nth << " left " << left.size()
                                << " template(s) of a missing object, such as " << left.front();
      if (sweep == "gc") {  // what the sweep left is a healthy cache
        const auto v = npucache::cache::admin::verify(dir.string(), false);
        EXPECT_TRUE(v.bad.empty()) << "gc stopped at removal " << nth << ": " << v.bad.front().first << ": "
                                   << v.bad.front().second;
        if (!v.bad.empty()) break;
      }
      if (!left.empty()) break;
    }
    EXPECT_TRUE(finished) << sweep << " never ran to its end";
    // Each object and each template file was a removal it was stopped at.
    EXPECT_GE(stops, made_files) << sweep;
  }
  fs::remove_all(pristine);
}

// Processes killed (SIGKILL) while they capture and save templates leave a
// cache that verify finds clean and that serves the next start.
TEST_F(Serving, KillDuringTemplateSaveLeavesAValidCache) {
  std::string batches;
  for (int b = 2; b <= 60; ++b) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  for (int round = 0; round < 6; ++round) {
    const std::string cmd = "timeout -s KILL 0." + std::to_string(1 + round) + " " + std::string(SERVE_WORKER) + " " +
                            dir.string() + " --mode reduce-overhead --dynamic true --batches " + batches;
    (void)sh(cmd);
  }
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  Out r = serve("--mode reduce-overhead --dynamic true --batches 2,3,4");
  ASSERT_EQ(r.status, 0) << r.text;
  EXPECT_LE(maxdiff(r.text), 1e-6) << r.text;
  EXPECT_TRUE(has(r.text, "recaptured 0")) << r.text;
}
