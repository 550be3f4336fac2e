// A CompiledMethod shared by request threads: every thread's first call at
// once (cold: the program is compiled once while the others wait; warm:
// served from the cache), then concurrent calls, in both modes, each result
// equal to eager. Run under TSan in CI.
#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/models/models.h>
#include <npucache/ops.h>

#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <latch>
#include <thread>

using namespace npucache;

namespace {

constexpr int kThreads = 8;
constexpr int kCalls = 12;

std::vector<float> input_of(int thread, int call, int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<float>((i * 7 + thread * 3 + call) % 17) / 8.0f - 1.0f;
  return v;
}

CompilerConfig config(CompileMode m) {
  CompilerConfig c;
  c.mode = m;
  c.autotune_candidates = 2;
  c.autotune_repetitions = 1;
  c.autotune_min_time_us = 0;
  return c;
}

// Calls `f` from kThreads threads at once (first calls included) and checks
// every result against eager `mlp.forward`. Returns the number of wrong
// results or errors.
template <class F>
int hammer(models::SimpleMLP& mlp, F& f, std::vector<std::string>& errors, std::vector<Outcome>* outcomes = nullptr) {
  // Eager references, computed before any thread starts.
  std::vector<std::vector<std::vector<float>>> expect(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int c = 0; c < kCalls; ++c) {
      const int64_t rows = 2 + (c % 2);  // two shapes: a dynamic program binds both
      expect[static_cast<std::size_t>(t)].push_back(
          mlp.forward(Tensor::from_vector(input_of(t, c, rows * 128), {rows, 128})).to_vector());
    }
  std::atomic<int> wrong{0};
  std::mutex mu;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        for (int c = 0; c < kCalls; ++c) {
          const int64_t rows = 2 + (c % 2);
          Tensor y = f(Tensor::from_vector(input_of(t, c, rows * 128), {rows, 128}));
          const auto got = y.to_vector();
          const auto& want = expect[static_cast<std::size_t>(t)][static_cast<std::size_t>(c)];
          bool ok = got.size() == want.size();
          for (std::size_t i = 0; ok && i < got.size(); ++i) ok = std::fabs(got[i] - want[i]) <= 1e-4f;
          if (!ok) ++wrong;
          if (outcomes && c == kCalls - 1) {
            std::lock_guard lock(mu);
            outcomes->push_back(f.status().outcome);
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors.push_back(e.what());
        ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  return wrong.load();
}

class Threads : public ::testing::TestWithParam<CompileMode> {};

}  // namespace

TEST_P(Threads, CompileSharedByThreadsFirstCallIncluded) {
  models::SimpleMLP mlp;
  CompileOptions o;
  o.config = config(GetParam());
  o.dynamic = true;
  auto f = compile(mlp, &models::SimpleMLP::forward, o);
  std::vector<std::string> errors;
  EXPECT_EQ(hammer(mlp, f, errors), 0) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(f.compiles(), 1u);  // one first call compiled; the others waited
}

TEST_P(Threads, CacheCompileColdThenWarmSharedByThreads) {
  const testing_support::TempDir tmp(GetParam() == CompileMode::reduce_overhead ? "threads-ro" : "threads-ma",
                                     testing_support::current_test_name());
  const std::string dir = (tmp.path() / "cache").string();
  for (const bool warm : {false, true}) {
    models::SimpleMLP mlp;
    CacheOptions o;
    o.compile.config = config(GetParam());
    o.compile.dynamic = true;
    o.cache_dir = dir;
    auto f = cache_compile(mlp, &models::SimpleMLP::forward, o);
    std::vector<std::string> errors;
    std::vector<Outcome> outcomes;
    EXPECT_EQ(hammer(mlp, f, errors, &outcomes), 0)
        << (warm ? "warm: " : "cold: ") << (errors.empty() ? "" : errors.front());
    EXPECT_EQ(f.compiles(), warm ? 0u : 1u);
    ASSERT_EQ(outcomes.size(), static_cast<std::size_t>(kThreads));
    for (Outcome oc : outcomes) EXPECT_EQ(outcome_name(oc), outcome_name(warm ? Outcome::hit : Outcome::compiled));
  }
}

// A static program recompiles per shape: concurrent recompiles of the
// same shape happen once.
TEST_P(Threads, ConcurrentRecompilesHappenOncePerShape) {
  models::SimpleMLP mlp;
  CompileOptions o;
  o.config = config(GetParam());
  o.dynamic = false;
  auto f = compile(mlp, &models::SimpleMLP::forward, o);
  std::vector<std::string> errors;
  EXPECT_EQ(hammer(mlp, f, errors), 0) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(f.compiles(), 2u);  // rows 2 and 3
}

INSTANTIATE_TEST_SUITE_P(Modes, Threads, ::testing::Values(CompileMode::max_autotune, CompileMode::reduce_overhead),
                         [](const auto& param_info) {
                           return param_info.param == CompileMode::reduce_overhead ? std::string("ReduceOverhead")
                                                                                   : std::string("MaxAutotune");
                         });
