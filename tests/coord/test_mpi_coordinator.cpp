// The MPI cache coordinator under mpiexec (1, 2, 4 and 8 ranks).
#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/device.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>
#include <npucache/ops.h>
#include <npucache/trace.h>

#include "cache/source.h"
#include "compiler/compiled_graph.h"
#include "compiler/tuning_table.h"
#include "mpi/comm.h"
#include "process/context.h"
#include "storage/stats.h"
#include "support/cache_files.h"
#include "support/mpi_temp_dir_test.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

// The tests' own collectives (outside the coordinator), bounded so a
// broken protocol fails the test instead of hanging it.
const mpi::Step& kTest = testing_support::kMpiTestStep;

struct Layout {
  int tp, pp;
};

// tp=2 when possible, pp as large as the world allows (at most 4).
Layout layout_for(int world) {
  int tp = world % 2 == 0 ? 2 : 1;
  int pp = 1;
  while (pp * 2 <= 4 && world % (tp * pp * 2) == 0) pp *= 2;
  return {tp, pp};
}

int expected_unique(const Layout& l) {  // distinct stage kinds x 2 methods
  const int kinds = l.pp == 1 ? 1 : l.pp == 2 ? 2 : 3;
  return 2 * kinds;
}

class Coordinator : public testing_support::MpiTempDirTest {
 protected:
  Coordinator() : MpiTempDirTest("coord") {}
  void SetUp() override {
    MpiTempDirTest::SetUp();
    layout = layout_for(world);
    comm = make_mpi_communicator(layout.tp, layout.pp);
    set_current_communicator(comm.get());
    model = std::make_unique<models::TinyLlama>(models::TinyLlamaConfig{}, models::stage_ranks(*comm));
    dir = base + "/cache";  // not created: the caches make it
  }
  void TearDown() override {
    set_current_communicator(nullptr);
    MpiTempDirTest::TearDown();
  }

  CacheOptions options(const std::string& method, const std::string& d = "") const {
    CacheOptions o;
    o.cache_dir = d.empty() ? dir : d;
    o.compile.method_name = method;
    CompilerConfig c;
    c.autotune_candidates = 2;
    c.autotune_min_time_us = 0;
    o.compile.config = c;
    return o;
  }

  // One job: both methods cached and run once.
  std::vector<MethodReport> job(const std::string& d = "", dist::CoordinatorOptions co = {},
                                const CacheOptions* given = nullptr) {
    dist::clear_reports();
    CacheOptions po = given ? *given : options("prompt", d), dopt = given ? *given : options("decode", d);
    po.compile.method_name = "prompt";
    dopt.compile.method_name = "decode";
    auto prompt = dist::cache_compile(*model, &models::TinyLlama::prompt, po, co);
    auto decode = dist::cache_compile(*model, &models::TinyLlama::decode, dopt, co);
    auto kv = model->make_kv_cache(1);
    std::vector<int64_t> t{1, 2, 3, 4, 5, 6}, p{0, 1, 2, 3, 4, 5};
    prompt(Tensor::from_vector_i64(t, {1, 6}), Tensor::from_vector_i64(p, {1, 6}), kv);
    decode(Tensor::from_vector_i64({7}, {1, 1}), Tensor::from_vector_i64({6}, {1, 1}), kv);
    Platform::get().device(current_device()).synchronize();
    return dist::reports();
  }

  // The same job with each rank's own cache_compile (no coordinator):
  // the compiles this rank did.
  std::size_t single_job(const std::string& d) {
    auto prompt = cache_compile(*model, &models::TinyLlama::prompt, options("prompt", d));
    auto decode = cache_compile(*model, &models::TinyLlama::decode, options("decode", d));
    auto kv = model->make_kv_cache(1);
    std::vector<int64_t> t{1, 2, 3, 4, 5, 6}, p{0, 1, 2, 3, 4, 5};
    prompt(Tensor::from_vector_i64(t, {1, 6}), Tensor::from_vector_i64(p, {1, 6}), kv);
    decode(Tensor::from_vector_i64({7}, {1, 1}), Tensor::from_vector_i64({6}, {1, 1}), kv);
    Platform::get().device(current_device()).synchronize();
    return prompt.compiles() + decode.compiles();
  }

  // Removes rank `victim`'s entry of `method` from the shared cache (every
  // rank calls it); returns the entry's path, "" when there was none.
  std::string remove_entry_of(int victim, const std::string& method) {
    std::string path;
    if (rank == victim)
      for (const auto& e : testing_support::entries(dir))
        if (e.path.find("global_rank" + std::to_string(victim) + "/" + method) != std::string::npos ||
            (world == 1 && e.path.find("/" + method) != std::string::npos))
          path = e.path;
    mpi::Comm::world().broadcast(path, victim, kTest);
    if (rank == 0 && !path.empty()) testing_support::remove_entry(dir, path);
    mpi::Comm::world().barrier(kTest);
    return path;
  }

  // Sum of a per-rank count over all ranks.
  int total(int mine) const {
    int n = 0;
    for (const auto& s : mpi::Comm::world().allgather(std::to_string(mine), kTest)) n += std::stoi(s);
    return n;
  }
  std::set<std::string> all_keys(const std::vector<MethodReport>& reps) const {
    std::string mine;
    for (const auto& r : reps) mine += r.graph_key + "\n";
    std::set<std::string> keys;
    for (const auto& s : mpi::Comm::world().allgather(mine, kTest)) {
      std::size_t at = 0;
      while (at < s.size()) {
        auto nl = s.find('\n', at);
        keys.insert(s.substr(at, nl - at));
        at = nl + 1;
      }
    }
    return keys;
  }
  static int count(const std::vector<MethodReport>& reps, bool MethodReport::*field) {
    int n = 0;
    for (const auto& r : reps) n += r.*field;
    return n;
  }

  Layout layout{1, 1};
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<models::TinyLlama> model;
  std::string dir;  // a cache directory in rank 0's, not created: every rank's the same
};

}  // namespace

// A cache warmed by each rank's own cache_compile serves the coordinated
// job, and the other way round: the model is the same, so are its entries
// (what a save stores, program or graph, is not part of the key).
TEST_F(Coordinator, SingleProcessAndDistributedCachesAreOne) {
  const std::string first_single = dir + "-a", first_dist = dir + "-b";
  EXPECT_GT(total(static_cast<int>(single_job(first_single))), 0);
  const auto warm = job(first_single);
  EXPECT_EQ(total(count(warm, &MethodReport::compiled)), 0);
  EXPECT_EQ(total(count(warm, &MethodReport::hit)), 2 * world);
  const auto cold = job(first_dist);
  EXPECT_GT(total(count(cold, &MethodReport::compiled)), 0);
  EXPECT_EQ(total(static_cast<int>(single_job(first_dist))), 0);
  mpi::Comm::world().barrier(kTest);
  if (rank == 0) {
    fs::remove_all(first_single);
    fs::remove_all(first_dist);
  }
}

namespace {
struct ConstScale : nn::Module {
  Tensor run(const Tensor& x) const { return ops::relu(x) * 2.0 + 1.0; }
};
}  // namespace

// A const member function is coordinated like any other: compiled once for
// the job, then a hit on every rank, each computing the right values.
TEST_F(Coordinator, ConstMethodsAreCoordinated) {
  for (int round = 0; round < 2; ++round) {
    dist::clear_reports();
    ConstScale m;
    auto f = dist::cache_compile(m, &ConstScale::run, options("run"));
    const std::vector<float> got = f(Tensor::from_vector({-1.0f, 0.5f, 2.0f}, {1, 3})).to_vector();
    EXPECT_EQ(got, (std::vector<float>{1.0f, 2.0f, 5.0f}));
    const auto reps = dist::reports();
    ASSERT_EQ(reps.size(), 1u);
    if (round == 0) {
      EXPECT_EQ(total(reps[0].compiled), 1);
    } else {
      EXPECT_EQ(total(reps[0].hit), world);
    }
  }
}

namespace {
// A method one rank cannot cache: on rank `bad` it draws random numbers
// (a ConfigError at the trace: cache_compile refuses RNG graphs).
struct OneRankRandom : nn::Module {
  int rank = 0, bad = -1;
  Tensor run(const Tensor& x) const { return rank == bad ? ops::dropout(x, 0.5) : ops::relu(x) * 2.0; }
};
}  // namespace

// A rank whose own trace fails does not leave the others waiting until the
// timeout: every rank stops at once with the same typed error naming that
// rank, the phase and the cause; on both hit checks (the fast path traces
// after the arrival, on a miss). When every rank fails, each keeps its
// own error.
TEST_F(Coordinator, ALocalTraceFailureIsAgreedByEveryRank) {
  if (world < 2) GTEST_SKIP() << "needs a rank that fails and one that does not";
  const int bad = world - 1;
  for (const std::string fast : {"", "v1"}) {
    for (const bool everyone : {false, true}) {
      OneRankRandom m;
      m.rank = rank;
      m.bad = everyone ? rank : bad;
      CacheOptions o = options("run", dir + "-agreed" + fast + (everyone ? "-all" : ""));
      o.code_version = fast;
      dist::CoordinatorOptions co;
      co.timeout_s = 20;
      auto f = dist::cache_compile(m, &OneRankRandom::run, o, co);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        f(Tensor::from_vector({-1.0f, 0.5f}, {1, 2}));
        ADD_FAILURE() << "rank " << rank << " ran a call that rank " << bad << " could not trace";
      } catch (const ConfigError& e) {
        const std::string what = e.what();
        if (everyone) {
          EXPECT_EQ(what.find("failed in phase"), std::string::npos) << what;  // its own error
          EXPECT_NE(what.find("random numbers"), std::string::npos) << what;
        } else {
          // In the arrival, or (the fast path traces only on a miss) in the plan.
          EXPECT_NE(what.find("rank " + std::to_string(bad) + " failed in phase "), std::string::npos) << what;
          EXPECT_NE(what.find(" (tracing its call"), std::string::npos) << what;
          EXPECT_NE(what.find("random numbers"), std::string::npos) << what;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << " got another error: " << e.what();
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(waited, 10.0) << "the ranks waited for the failed one";
      mpi::Comm::world().barrier(kTest);
      if (rank == 0) fs::remove_all(o.cache_dir);
    }
  }
}

TEST_F(Coordinator, CompilesEachUniqueSubgraphOnceThenWarmStartLoadsAll) {
  auto cold = job();
  const auto keys = all_keys(cold);
  EXPECT_EQ(static_cast<int>(keys.size()), expected_unique(layout));
  EXPECT_EQ(total(count(cold, &MethodReport::compiled)), static_cast<int>(keys.size()));
  EXPECT_EQ(total(count(cold, &MethodReport::hit)), 0);
  // Ranks sharing a key run byte-identical artifacts.
  std::string mine;
  for (const auto& r : cold) mine += r.graph_key + "=" + r.artifact_checksum + "\n";
  std::map<std::string, std::set<std::string>> sums;
  for (const auto& s : mpi::Comm::world().allgather(mine, kTest)) {
    std::size_t at = 0;
    while (at < s.size()) {
      auto nl = s.find('\n', at), eq = s.find('=', at);
      sums[s.substr(at, eq - at)].insert(s.substr(eq + 1, nl - eq - 1));
      at = nl + 1;
    }
  }
  for (const auto& [k, set] : sums) EXPECT_EQ(set.size(), 1u) << k;
  // The owners are spread: with more than one key not every compile is rank 0's.
  std::set<int> owners;
  for (const auto& s : mpi::Comm::world().allgather(std::to_string(cold[0].owner), kTest)) owners.insert(std::stoi(s));
  if (world >= 4) {
    EXPECT_GT(owners.size(), 1u);
  }
  auto warm = job();
  EXPECT_EQ(total(count(warm, &MethodReport::hit)), 2 * world);
  EXPECT_EQ(total(count(warm, &MethodReport::compiled)), 0);
}

TEST_F(Coordinator, RanksThatReceiveAnArtifactReuseItsAutotuneDecisions) {
  compiler::TuningTable::process().clear();
  auto cold = job();
  // A method this rank received and did not compile: compiling it here
  // (traced and compiled, not run: the ranks' methods differ) times
  // nothing, its decisions came with the artifact.
  int checked = 0;
  for (const auto& r : cold) {
    if (!r.fetched || r.compiled) continue;
    TraceOptions to;
    to.method_name = r.method;
    auto kv = model->make_kv_cache(1);
    const CompilerConfig config = *options(r.method).compile.config;
    auto compiled = [&](TraceResult tr, const FlatArgs& args) {
      const SymBindings b = tr.signature.bind(args);
      return compiler::compile_graph(std::move(tr), config, {}, b, true, current_device());
    };
    compiler::CompiledGraph g;
    if (r.method == "prompt") {
      const Tensor t = Tensor::from_vector_i64({1, 2, 3, 4, 5, 6}, {1, 6});
      const Tensor p = Tensor::from_vector_i64({0, 1, 2, 3, 4, 5}, {1, 6});
      g = compiled(trace_method(*model, &models::TinyLlama::prompt, to, t, p, kv), flatten_args(to, t, p, kv));
    } else {
      const Tensor t = Tensor::from_vector_i64({7}, {1, 1}), p = Tensor::from_vector_i64({6}, {1, 1});
      g = compiled(trace_method(*model, &models::TinyLlama::decode, to, t, p, kv), flatten_args(to, t, p, kv));
    }
    EXPECT_EQ(g.kernels_tuned, 0) << r.method;
    EXPECT_GT(g.kernels_reused, 0) << r.method;
    ++checked;
  }
  if (world >= 2) {
    EXPECT_GT(total(count(cold, &MethodReport::fetched)), 0);
    EXPECT_GT(total(checked), 0);
  }
  // The compiling ranks' reports count what they timed, or the compiled
  // regions (tuned) they took from the store, another rank's.
  for (const auto& r : cold)
    if (r.compiled) {
      EXPECT_GT(r.kernels_tuned + r.kernels_reused + r.regions_reused, 0) << r.method;
    }
}

TEST_F(Coordinator, RemovingOneEntryMakesOnlyThatRankFetchOrLoad) {
  job();
  const int victim = world - 1;
  ASSERT_FALSE(remove_entry_of(victim, "prompt").empty());
  auto again = job();
  EXPECT_EQ(total(count(again, &MethodReport::compiled)), 0);
  EXPECT_EQ(total(count(again, &MethodReport::hit)), 2 * world - 1);
  if (rank == victim) {
    EXPECT_FALSE(again[0].hit);
  }
}

// The map of hosts is made only when a method's arrival agrees that some
// rank misses, and then by every rank at that point: in a fresh process
// context (a new coordinator), a warm prompt makes none (one collective of
// set-up: the communicator), a decode one rank misses makes it on every
// rank, and the job's results and reports are whole.
TEST_F(Coordinator, TheMapOfHostsIsMadeByTheFirstMethodThatMisses) {
  job();
  const int victim = world - 1;
  ASSERT_FALSE(remove_entry_of(victim, "decode").empty());
  process::Context::Scope fresh;
  auto again = job();
  const auto steps = dist::step_reports();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_TRUE(steps[0].all_hit);
  EXPECT_EQ(steps[0].hosts, 0);  // the warm prompt made no map
  EXPECT_GT(steps[0].setup_s, 0.0);
  EXPECT_FALSE(steps[1].all_hit);
  EXPECT_EQ(total(steps[1].hosts), world);  // every rank made it, one host here
  EXPECT_EQ(total(count(again, &MethodReport::hit)), 2 * world - 1);
  EXPECT_EQ(total(count(again, &MethodReport::compiled)), 0);  // another rank's store holds the object
  if (rank == victim) {
    EXPECT_FALSE(again[1].hit);
  }
}

// The 2-rank caches of the previous formats (tests/fixtures/format-10.0.0/, format-9.0.0/, format-8.0.0/, format-7.0.0/,
// format-6.0.0/, format-5.0.0/ and format-4.0.0/ mpi-tp1-pp2; 3.0.0's is mpi_format_fixture_3's, written by `npucache warmup --tp 1 --pp 2`) under a
// coordinated job, on the default hit check and on the code_version fast
// path: every rank's entries are reported stale with the version, nothing
// of it is served, and the next job is served from the rebuilt entries.
TEST_F(Coordinator, PreviousFormatCacheIsStaleOnBothHitChecks) {
  if (world != 2) GTEST_SKIP() << "the fixture is a cache of a 2-rank job";
  for (const std::string version : {"10.0.0", "9.0.0", "8.0.0", "7.0.0", "6.0.0", "5.0.0", "4.0.0"})
    for (const bool fast : {false, true}) {
      const std::string d = dir + "-" + version + (fast ? "-fast" : "-trace");
      if (rank == 0) {
        fs::create_directories(fs::path(d).parent_path());
        fs::copy(fs::path(FIXTURES) / ("format-" + version) / "mpi-tp1-pp2", d, fs::copy_options::recursive);
        for (const auto& f : fs::recursive_directory_iterator(d))
          fs::permissions(f.path(), fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove);
        fs::permissions(d, fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove);
      }
      mpi::Comm::world().barrier(kTest);
      CacheOptions stale = options("prompt", d);
      stale.code_version = "v1";
      if (fast) stale.hit_check = HitCheck::code_version;
      const auto old = job(d, {}, &stale);
      EXPECT_EQ(total(count(old, &MethodReport::hit)), 0);
      for (const auto& r : old)
        EXPECT_NE(r.reason.find("is of another version; format_version: stored '" + version + "', now '"),
                  std::string::npos)
            << (fast ? "fast path, " : "") << r.method << ": " << r.reason;
      const auto again = job(d, {}, &stale);
      EXPECT_EQ(total(count(again, &MethodReport::hit)), 2 * world) << (fast ? "fast path" : "");
      EXPECT_EQ(total(count(again, &MethodReport::compiled)), 0) << (fast ? "fast path" : "");
      mpi::Comm::world().barrier(kTest);
      if (rank == 0) fs::remove_all(d);
    }
}

TEST_F(Coordinator, NodeLocalCacheDirectories) {
  // Two simulated nodes: the lower and upper half of the ranks.
  const std::string local = dir + (rank < (world + 1) / 2 ? "/node0" : "/node1");
  auto cold = job(local);
  EXPECT_EQ(total(count(cold, &MethodReport::compiled)), static_cast<int>(all_keys(cold).size()));
  EXPECT_EQ(total(count(cold, &MethodReport::writer)), world > 1 ? 2 * 2 : 2);  // one writer per store and method
  auto warm = job(local);
  EXPECT_EQ(total(count(warm, &MethodReport::hit)), 2 * world);
}

TEST_F(Coordinator, ElasticReuseAcrossWorldSizesCompilesNothing) {
  job();
  // The same ranks as the second replica of a job twice as large.
  CacheOptions o = options("prompt");
  o.world_size = 2 * world;
  o.global_rank = world + rank;
  const storage::CacheStats before = storage::process_counters();
  auto bigger = job("", {}, &o);
  EXPECT_EQ(total(count(bigger, &MethodReport::compiled)), 0);
  // Warm work, counted as warm: the owners read the other layout's
  // objects, the other ranks received them; the statistics say so.
  int reused = 0;
  for (const auto& r : bigger) {
    const std::string_view from = cache::served_from(r);
    EXPECT_TRUE(from == "reused_other_layout" || from == "received") << r.method << ": " << from;
    reused += from == "reused_other_layout";
  }
  EXPECT_GT(total(reused), 0);
  const storage::CacheStats after = storage::process_counters();
  EXPECT_EQ(after.hits_other_layout + after.hits_rank - before.hits_other_layout - before.hits_rank, 2u);
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.misses_by_cause.at("absent") -
                (before.misses_by_cause.count("absent") ? before.misses_by_cause.at("absent") : 0),
            2u);
  EXPECT_EQ(total(count(bigger, &MethodReport::hit)), 0);  // new layout entries...
  int new_entries = 0;
  for (const auto& e : testing_support::entries(dir))
    new_entries += e.path.find("world" + std::to_string(2 * world) + "global_rank") != std::string::npos;
  EXPECT_EQ(new_entries, 2 * world);  // ...written for every rank and method
}

// A store holding objects without their programs (written by a process's
// own cache_compile in reduce-overhead mode) serves a coordinated job whose
// entries it lacks: the owners read the stored graphs, every rank lowers
// what it receives, and the job computes what the eager model does.
TEST_F(Coordinator, StoredGraphsWithoutProgramsAreLoweredByEveryRank) {
  auto opts = [&](const std::string& method, int world_size, int global_rank) {
    CacheOptions o = options(method);  // max-autotune without ge_cache: the graph only
    o.ge_cache = false;
    o.world_size = world_size;
    o.global_rank = global_rank;
    return o;
  };
  std::vector<int64_t> t{1, 2, 3, 4, 5, 6}, p{0, 1, 2, 3, 4, 5};
  const Tensor tokens = Tensor::from_vector_i64(t, {1, 6}), positions = Tensor::from_vector_i64(p, {1, 6});
  {
    // Entries under another layout, objects without programs.
    auto prompt = cache_compile(*model, &models::TinyLlama::prompt, opts("prompt", 2 * world, world + rank));
    auto kv = model->make_kv_cache(1);
    prompt(tokens, positions, kv);
    Platform::get().device(current_device()).synchronize();
  }
  mpi::Comm::world().barrier(kTest);
  int with_program = 0, stored = 0;
  if (rank == 0)
    for (const auto& e : testing_support::entries(dir)) {
      ++stored;
      with_program += e.with_program;
    }
  ASSERT_EQ(total(with_program), 0);
  ASSERT_EQ(total(stored), world);
  dist::clear_reports();
  auto prompt = dist::cache_compile(*model, &models::TinyLlama::prompt, opts("prompt", world, rank));
  auto kv = model->make_kv_cache(1);
  const std::vector<float> got = prompt(tokens, positions, kv).to_vector();
  auto kv_eager = model->make_kv_cache(1);
  const std::vector<float> want = model->prompt(tokens, positions, kv_eager).to_vector();
  ASSERT_EQ(got.size(), want.size());
  float worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst, 1e-4f);
  const auto reps = dist::reports();
  EXPECT_EQ(total(count(reps, &MethodReport::compiled)), 0);
  EXPECT_GT(total(count(reps, &MethodReport::read_store)), 0);
}

TEST_F(Coordinator, IndependentModeCompilesOnEveryRank) {
  dist::CoordinatorOptions co;
  co.independent = true;
  auto cold = job("", co);
  EXPECT_EQ(total(count(cold, &MethodReport::compiled)), 2 * world);
}

// An owner's compile error reaches every rank, of its own class (not a
// CommError string), naming the rank, the phase and the cause.
TEST_F(Coordinator, OwnerCompileFailureReachesEveryRank) {
  CacheOptions o = options("prompt");
  o.compile.custom_decompositions[Op::silu] = {"test.fail_on_rank0", [](const std::vector<Tensor>& in, const Attrs&) {
                                                 if (MpiSession::world_rank() == 0)
                                                   throw Error("injected compile failure");
                                                 return in[0] * ops::sigmoid(in[0]);
                                               }};
  try {
    job("", {}, &o);
    ADD_FAILURE() << "no error";
  } catch (const CommError& e) {
    ADD_FAILURE() << "a CommError: " << e.what();
  } catch (const Error& e) {
    if (world > 1) {  // alone, the rank keeps its own error
      EXPECT_NE(std::string(e.what()).find("cache_compile of prompt: rank 0 failed in phase compile"),
                std::string::npos)
          << e.what();
    }
    EXPECT_NE(std::string(e.what()).find("injected compile failure"), std::string::npos) << e.what();
  }
}

// A rank that never arrives, stops or runs another command: the process-
// level tests (tests/mpi/test_job_faults.sh, tests/mpi/fault_worker.cpp,
// tests/support/test_multihost.sh), since a timed-out job cannot go on.

TEST_F(Coordinator, ReportsEveryStepAndOneWriterPerMethodForOneSharedDirectory) {
  auto cold = job();
  const auto steps = dist::step_reports();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].method, "prompt");
  EXPECT_EQ(steps[1].method, "decode");
  for (const auto& s : steps) {
    EXPECT_FALSE(s.all_hit);
    EXPECT_EQ(s.hosts, 1);
    EXPECT_EQ(s.bytes_between_hosts, 0u);  // one host: nothing crosses the network
    EXPECT_GT(s.key_bytes, 0u);
    EXPECT_GT(s.lookup_s, 0);
  }
  // One directory: one store, one writer per method, every rank's entry written.
  EXPECT_EQ(total(count(cold, &MethodReport::writer)), 2);
  EXPECT_EQ(total(steps[0].entries_written + steps[1].entries_written), 2 * world);
  auto warm = job();
  const auto warm_steps = dist::step_reports();
  ASSERT_EQ(warm_steps.size(), 2u);
  EXPECT_TRUE(warm_steps[0].all_hit);  // one all-reduce, nothing else
  EXPECT_EQ(warm_steps[0].keys_s, 0);
  // Where each rank's warm start went: every phase ran, within the first call.
  ASSERT_EQ(warm.size(), 2u);
  for (const MethodReport& r : warm) {
    const WarmPhases& w = r.warm;
    EXPECT_TRUE(r.hit) << r.method;
    for (double phase : {w.trace_s, w.key_s, w.read_s, w.decode_s, w.own_key_s, w.bind_s, w.first_run_s})
      EXPECT_GT(phase, 0) << r.method;
    EXPECT_LE(w.trace_s + w.key_s + w.read_s + w.decode_s + w.own_key_s + w.bind_s, w.ready_s) << r.method;
    EXPECT_LE(r.total_s, w.ready_s) << r.method;
  }
}

TEST_F(Coordinator, FlatExchangeRunsTheSameArtifacts) {
  dist::CoordinatorOptions co;
  co.flat_exchange = true;
  auto cold = job("", co);
  EXPECT_EQ(total(count(cold, &MethodReport::compiled)), static_cast<int>(all_keys(cold).size()));
  EXPECT_EQ(total(count(cold, &MethodReport::fetched) + count(cold, &MethodReport::compiled)), 2 * world);
}

TEST_F(Coordinator, TimeoutMustBePositiveAndFinite) {
  for (double t : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    dist::CoordinatorOptions co;
    co.timeout_s = t;
    EXPECT_THROW(dist::cache_compile(*model, &models::TinyLlama::prompt, options("prompt"), co), ConfigError) << t;
  }
}

// Automatic dynamic under MPI: each rank has its own cache directory and
// only rank 0's holds a profile and the dynamic program (an earlier process
// of rank 0 saw two batch sizes). The ranks merge their profiles before
// tracing, so every rank traces the dynamic graph and receives rank 0's
// program: nothing is compiled in the job, and every rank's result equals
// eager, for this batch size and the next.
TEST_F(Coordinator, DynamicShapeProfilesAreMergedAcrossRanks) {
  const std::string mine = dir + "/rank" + std::to_string(rank);
  models::SimpleMLP mlp;
  CacheOptions o;
  o.cache_dir = mine;
  o.compile.method_name = "forward";
  o.compile.dynamic = std::nullopt;
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  auto batch = [](int64_t b) {
    std::vector<float> v(static_cast<std::size_t>(b * 128));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
    return Tensor::from_vector(v, {b, 128});
  };
  if (rank == 0) {
    auto earlier = cache_compile(mlp, &models::SimpleMLP::forward, o);
    (void)earlier(batch(2));
    (void)earlier(batch(3));
    ASSERT_EQ(earlier.status().dynamic_dims, std::vector<std::string>{"arg0 dim 0"});
  }
  mpi::Comm::world().barrier(kTest);
  dist::clear_reports();
  auto f = dist::cache_compile(mlp, &models::SimpleMLP::forward, o);
  Tensor x = batch(5);
  const auto got = f(x).to_vector(), want = mlp.forward(x).to_vector();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
  EXPECT_EQ(f.status().dynamic_dims, std::vector<std::string>{"arg0 dim 0"}) << "rank " << rank;
  float compiles = static_cast<float>(f.compiles());
  mpi::Comm::world().all_reduce_sum(&compiles, 1, kTest);
  EXPECT_EQ(compiles, 0.0f) << "the ranks traced different graphs";
  (void)f(batch(7));  // another size: no compile on any rank
  EXPECT_EQ(f.compiles(), 0u);
}
