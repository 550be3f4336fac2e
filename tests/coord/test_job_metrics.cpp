// A job's metrics (storage/metrics.h): every rank's counters, as the job
// report carries them, summed at rank 0 and written in Prometheus' text
// format: one sample per label value, no rank label, label values escaped,
// sample values that read back as the same numbers.
#include "coord/job_report.h"
#include "storage/metrics.h"

#include <gtest/gtest.h>

#include <string>
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
