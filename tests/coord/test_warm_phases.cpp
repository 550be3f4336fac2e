// Where a warm start's time goes (MethodReport::warm): a method served
// from its own entry in a fresh process records every phase (trace, key,
// read, decode, bind, first run), the phases lie within the first call's
// time, the first call's record is amended once its run ends, and a method
// only prepared runs nothing. Each process::Context::Scope is a process of
// its own; the cache's source reports to a sink of the test (the
// coordinator's registry under MPI: tests/coord/test_mpi_coordinator.cpp).
#include "cache/cache_compile.h"
#include "cache/source.h"
#include "compiler/engine.h"
#include "coord/reports.h"
#include "process/context.h"
#include "support/temp_dir_test.h"

#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace npucache;

namespace {

// Two layers with weights: a program with parameters to resolve.
struct TwoLayers : nn::Module {
  TwoLayers() {
    std::vector<float> w(64);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 7);
    w1 = register_parameter("w1", Tensor::from_vector(w, {8, 8}));
    w2 = register_parameter("w2", Tensor::from_vector(w, {8, 8}));
  }
  std::string type_name() const override { return "TwoLayers"; }
  Tensor run(const Tensor& x) { return ops::matmul(ops::relu(ops::matmul(x, w1)), w2); }
  Tensor w1, w2;
};

Tensor input() {
  std::vector<float> v(32);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 5);
  return Tensor::from_vector(v, {4, 8});
}

class WarmPhasesTest : public testing_support::TempDirTest {
 protected:
  // cache_compile's function of `m`, its reports kept in `records` (added,
  // then amended by ticket as the coordinator's registry does).
  CompiledMethod<TwoLayers, Tensor, const Tensor&> cached(TwoLayers& m) {
    CacheOptions o;
    o.cache_dir = dir.string();
    o.compile.method_name = "run";
    o.compile.config = CompilerConfig{};
    o.compile.config->autotune_candidates = 1;
    records.clear();
    const cache::MethodSource::ReportSink sink{
        [this](const MethodReport& r) {
          records.push_back(r);
          return static_cast<std::uint64_t>(records.size() - 1);
        },
        [this](std::uint64_t ticket, const MethodReport& r) { records.at(ticket) = r; }};
    auto source = std::make_shared<cache::LocalSource>(cache::method_cache(m, o, cache::cached_config(o), false), sink);
    return {m, &TwoLayers::run, detail::make_function(m, o.compile, std::move(source))};
  }
  // The one first-call record.
  MethodReport first_record() const {
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? MethodReport{} : records.front();
  }
  std::vector<MethodReport> records;
};

double phases_sum(const WarmPhases& w) {
  return w.trace_s + w.key_s + w.read_s + w.decode_s + w.own_key_s + w.bind_s + w.first_run_s;
}

}  // namespace

TEST_F(WarmPhasesTest, AWarmStartRecordsEveryPhaseWithinItsTime) {
  TwoLayers m;
  {
    const process::Context::Scope cold;
    auto f = cached(m);
    (void)f(input());
    ASSERT_FALSE(first_record().hit);
  }
  const process::Context::Scope warm;
  auto f = cached(m);
  (void)f(input());
  const MethodReport r = first_record();
  ASSERT_TRUE(r.hit) << r.reason;
  const WarmPhases& w = r.warm;
  EXPECT_GT(w.trace_s, 0);
  EXPECT_GT(w.key_s, 0);
  EXPECT_GT(w.read_s, 0);
  EXPECT_GT(w.decode_s, 0);
  EXPECT_GT(w.own_key_s, 0);
  EXPECT_GT(w.bind_s, 0);
  EXPECT_GT(w.first_run_s, 0);
  EXPECT_GT(w.ready_s, 0);
  // The cache's phases lie within its first call; the engine's bind and the
  // run follow it.
  EXPECT_LE(w.trace_s + w.key_s + w.read_s + w.decode_s + w.own_key_s, r.total_s);
  EXPECT_LE(r.total_s, w.ready_s);
  EXPECT_LE(phases_sum(w) - w.first_run_s, w.ready_s);
  EXPECT_LE(phases_sum(w), w.ready_s + w.first_run_s);
  EXPECT_EQ(r.warm.trace_s, r.trace_s);  // the existing field keeps its meaning
  // A later call adds nothing to the record.
  (void)f(input());
  EXPECT_EQ(first_record().warm.first_run_s, w.first_run_s);
}

TEST_F(WarmPhasesTest, APreparedWarmStartRunsNothing) {
  TwoLayers m;
  {
    const process::Context::Scope cold;
    auto f = cached(m);
    (void)f(input());
  }
  const process::Context::Scope warm;
  auto f = cached(m);
  (void)f.prepare(input());
  const MethodReport r = first_record();
  ASSERT_TRUE(r.hit) << r.reason;
  EXPECT_EQ(r.warm.first_run_s, 0);
  EXPECT_GT(r.warm.read_s, 0);
  EXPECT_GT(r.warm.bind_s, 0);
  EXPECT_GT(r.warm.ready_s, 0);
  EXPECT_LE(phases_sum(r.warm), r.warm.ready_s);
}

// The coordinator's registry amends the record of a ticket and no other: a
// ticket of records cleared since (a program's clear_reports() between a
// first call and its run's end) amends nothing.
TEST(WarmPhasesRegistry, AnAmendReachesOnlyItsOwnRecord) {
  const process::Context::Scope process;
  MethodReport a, b;
  a.method = "prompt";
  b.method = "decode";
  const std::uint64_t ta = coord::add_report(a);
  const std::uint64_t tb = coord::add_report(b);
  EXPECT_NE(ta, tb);
  a.warm.first_run_s = 0.5;
  coord::amend_report(ta, a);
  auto all = dist::reports();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].warm.first_run_s, 0.5);
  EXPECT_EQ(all[1].warm.first_run_s, 0);
  dist::clear_reports();
  MethodReport c;
  c.method = "later";
  (void)coord::add_report(c);
  b.warm.first_run_s = 0.25;
  coord::amend_report(tb, b);
  all = dist::reports();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].method, "later");
  EXPECT_EQ(all[0].warm.first_run_s, 0);
}
