// A job's metrics (storage/metrics.h): every rank's counters, as the job
// report carries them, summed at rank 0 and written in Prometheus' text
// format: one sample per label value, no rank label, label values escaped,
// sample values that read back as the same numbers. The metrics file: not
// written by a dry run nor by a forked child, never through a planted link,
// the cache's size read from the object files' headers once, a bounded
// interval.
#include "coord/job_report.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "storage/metrics.h"
#include "storage/store.h"
#include "support/fault_env.h"
#include "support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace npucache;

namespace {

bool metrics_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(JobMetrics, RanksCountersSumWithoutARankLabel) {
  std::vector<coord::RankReport> ranks(3);
  for (int r = 0; r < 3; ++r) {
    ranks[r].rank = r;
    storage::CacheStats& c = ranks[r].counters;
    c.hits = 1;
    c.hits_remote = r == 0 ? 2 : 0;
    c.hits_rank = r == 0 ? 0 : 2;
    c.misses = 2;
    c.misses_by_cause["absent"] = 2;
    c.compile_time_saved_s = 0.25;
    c.restores = 4;
  }
  const coord::JobReport job = coord::assemble_job_report({}, ranks);
  const std::string text = storage::prometheus_text(job.counters, storage::CacheBytes{1000, 3000});
  EXPECT_TRUE(metrics_line(text, "npucache_hits_total{source=\"local\"} 3")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_hits_total{source=\"remote\"} 2")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_hits_total{source=\"rank\"} 4")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_hits_total{source=\"other_layout\"} 0")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_misses_total{cause=\"absent\"} 6")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_compile_seconds_avoided_total 0.75")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_captures_total{kind=\"restored\"} 12")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_cache_bytes{kind=\"raw\"} 3000")) << text;
  EXPECT_TRUE(metrics_line(text, "# TYPE npucache_cache_bytes gauge")) << text;
  EXPECT_TRUE(metrics_line(text, "# TYPE npucache_compiles_total counter")) << text;
  EXPECT_EQ(text.find("rank=\""), std::string::npos) << text;
  EXPECT_EQ(text.find("cause=\"unknown\""), std::string::npos) << text;
}

TEST(JobMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(storage::escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  storage::CacheStats c;
  c.remote.errors["odd \"kind\"\\\n"] = 1;
  c.misses = 3;  // counted before causes were: their cause is unknown
  const std::string text = storage::prometheus_text(c, std::nullopt);
  EXPECT_TRUE(metrics_line(text, "npucache_remote_operations_total{result=\"odd \\\"kind\\\"\\\\\\n\"} 1")) << text;
  EXPECT_TRUE(metrics_line(text, "npucache_misses_total{cause=\"unknown\"} 3")) << text;
  EXPECT_EQ(text.find("npucache_cache_bytes"), std::string::npos) << text;  // size unknown: no gauge
}

}  // namespace

// ---- The metrics file (NPUCACHE_METRICS_FILE) -------------------------------

namespace {

namespace fs = std::filesystem;
using testing_support::FaultEnv;
using testing_support::FileOp;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary | std::ios::trunc) << text; }

// The variables of the metrics file for one test, as they were afterwards.
class MetricsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"NPUCACHE_METRICS_FILE", "NPUCACHE_METRICS_INTERVAL"})
      if (const char* was = std::getenv(v)) saved_.emplace_back(v, was);
    file = tmp.path() / "npucache.prom";
    ::setenv("NPUCACHE_METRICS_FILE", file.c_str(), 1);
    ::setenv("NPUCACHE_METRICS_INTERVAL", "3600", 1);  // written only when the test says
  }
  void TearDown() override {
    ::unsetenv("NPUCACHE_METRICS_FILE");
    ::unsetenv("NPUCACHE_METRICS_INTERVAL");
    for (const auto& [v, was] : saved_) ::setenv(v.c_str(), was.c_str(), 1);
  }
  static storage::CacheStats hits(uint64_t n) {
    storage::CacheStats c;
    c.hits = n;
    return c;
  }
  testing_support::TempDir tmp{"metrics", ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  fs::path file;

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

// A dry run writes nothing: not at its start, not when a job gives its
// counters, not at its end; a real run over the same file does.
TEST_F(MetricsFile, DryRunLeavesTheFileAsItWas) {
  spit(file, "known text\n");
  {
    process::Context::Scope scope;
    ASSERT_TRUE(scope.context().get<process::DryRun>().claim(true));
    storage::start_metrics_file(scope.context());
    storage::set_job_counters(hits(7));
    scope.context().flush();
  }
  EXPECT_EQ(slurp(file), "known text\n");
  {
    process::Context::Scope scope;
    storage::start_metrics_file(scope.context());
    storage::set_job_counters(hits(7));
  }
  EXPECT_TRUE(metrics_line(slurp(file), "npucache_hits_total{source=\"local\"} 7")) << slurp(file);
}

// Links planted where a writer's temporary might go (the name an earlier
// version used, the names of the next temporaries) and at the file itself
// are never written through: their targets keep their bytes, the file is
// a regular file of mode 0644 (less the umask) with the new text.
TEST_F(MetricsFile, PlantedLinksAreNeverWrittenThrough) {
  const fs::path victim = tmp.path() / "victim", linked = tmp.path() / "linked";
  spit(victim, "precious");
  spit(linked, "precious too");
  const std::string pid = std::to_string(::getpid());
  fs::create_symlink(victim, file.string() + "." + pid + ".tmp");
  for (int n = 0; n < 64; ++n)
    fs::create_symlink(victim, tmp.path() / ("." + file.filename().string() + ".tmp." + pid + "." + std::to_string(n)));
  fs::create_symlink(linked, file);
  {
    process::Context::Scope scope;
    storage::start_metrics_file(scope.context());
    storage::set_job_counters(hits(3));
  }
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_EQ(slurp(linked), "precious too");
  ASSERT_FALSE(fs::is_symlink(file));
  EXPECT_TRUE(metrics_line(slurp(file), "npucache_hits_total{source=\"local\"} 3")) << slurp(file);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u & ~mask);
}

// The cache's size reads each object file's header once (a few KiB,
// never the artifact), and nothing of a file already seen.
TEST_F(MetricsFile, CacheSizeReadsHeadersOfNewObjectsOnly) {
  const fs::path cache = tmp.path() / "cache";
  storage::ObjectRecord o;
  o.raw.resize(1 << 20);
  uint64_t x = 88172645463325252ull;  // incompressible bytes: a file of about 1 MiB
  for (char& ch : o.raw) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ch = static_cast<char>(x);
  }
  o.meta.raw_size = o.raw.size();
  o.meta.checksum = storage::checksum(o.raw);
  o.graph_key = std::string(32, 'a');
  o.graph_text = {"graph"};
  {
    const storage::Store s = storage::Store::open(cache, storage::Create::yes);
    (void)s.put_object(o, s.writing());
  }
  auto env = std::make_shared<FaultEnv>();
  process::Context::Scope scope(env);
  const auto read_bytes = [&] {
    uint64_t n = 0;
    for (const auto& c : env->calls())
      if (c.op == FileOp::read && c.path.find("/objects/") != std::string::npos && c.result > 0)
        n += static_cast<uint64_t>(c.result);
    env->reset_counts();
    return n;
  };
  storage::KnownObjects known;
  const storage::CacheBytes first = storage::cache_bytes(cache, &known);
  EXPECT_EQ(first.raw, uint64_t{1} << 20);
  EXPECT_EQ(first.stored, fs::file_size(cache / "objects" / (o.graph_key + ".h5")));
  EXPECT_GT(first.stored, uint64_t{1} << 20);
  EXPECT_LE(read_bytes(), 16384u);
  const storage::CacheBytes again = storage::cache_bytes(cache, &known);
  EXPECT_EQ(again.raw, first.raw);
  EXPECT_EQ(again.stored, first.stored);
  EXPECT_EQ(read_bytes(), 0u);
}

// A child forked from a process with a metrics file neither writes the
// file (its flush, its context's end, a job's counters) nor waits for the
// parent's thread: it exits at once and cleanly, the file as the parent
// left it.
TEST_F(MetricsFile, ForkedChildLeavesTheParentsFile) {
  auto scope = std::make_unique<process::Context::Scope>();
  storage::start_metrics_file(scope->context());
  storage::set_job_counters(hits(5));
  const std::string parents = slurp(file);
  ASSERT_TRUE(metrics_line(parents, "npucache_hits_total{source=\"local\"} 5")) << parents;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    storage::set_job_counters(hits(9));
    scope.reset();
    std::exit(0);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 200 && done == 0; ++i) {
    done = ::waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    ADD_FAILURE() << "the forked child did not exit within 10 s";
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  EXPECT_EQ(slurp(file), parents);
  storage::set_job_counters(hits(6));  // the parent's thread and file go on
  EXPECT_TRUE(metrics_line(slurp(file), "npucache_hits_total{source=\"local\"} 6")) << slurp(file);
}

// The file's thread goes on through a flush of the program's own and stops
// in the context's last flush (shutdown's, or exit's), before any service
// goes, the file written once more.
TEST_F(MetricsFile, ThreadStopsInTheLastFlush) {
  const auto threads = [] {
    return std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator());
  };
  process::Context::Scope scope;
  const auto before = threads();
  storage::start_metrics_file(scope.context());
  EXPECT_EQ(threads(), before + 1);
  scope.context().flush();
  EXPECT_EQ(threads(), before + 1);
  EXPECT_FALSE(scope.context().ending());
  storage::set_job_counters(hits(2));
  fs::remove(file);
  scope.context().flush_for_exit();
  EXPECT_TRUE(scope.context().ending());
  // Joined; the kernel lists a thread a moment after it woke its joiner.
  for (int i = 0; i < 200 && threads() != before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(threads(), before);
  EXPECT_TRUE(metrics_line(slurp(file), "npucache_hits_total{source=\"local\"} 2")) << slurp(file);
}

// NPUCACHE_METRICS_INTERVAL: seconds in [1, 3600]; anything else (a busy
// loop's 1e-9 included) is the default, 5.
TEST_F(MetricsFile, IntervalIsBounded) {
  const auto interval = [](const char* v) {
    ::setenv("NPUCACHE_METRICS_INTERVAL", v, 1);
    return storage::metrics_interval();
  };
  EXPECT_EQ(interval("1"), 1.0);
  EXPECT_EQ(interval("2.5"), 2.5);
  EXPECT_EQ(interval("3600"), 3600.0);
  EXPECT_EQ(interval("1e-9"), 5.0);
  EXPECT_EQ(interval("0.5"), 5.0);
  EXPECT_EQ(interval("0"), 5.0);
  EXPECT_EQ(interval("3601"), 5.0);
  EXPECT_EQ(interval("soon"), 5.0);
  ::unsetenv("NPUCACHE_METRICS_INTERVAL");
  EXPECT_EQ(storage::metrics_interval(), 5.0);
}

}  // namespace
