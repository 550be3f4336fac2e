// New shapes after the first call under the MPI coordinator (4 and 8
// ranks): automatic dynamic makes a dim symbolic on a later call, and the
// ranks that need the new graph meet through a claim in their store, never
// a collective (docs/ARCHITECTURE.md, "A new shape after the first call").
// Each unique graph compiles once per job; ranks not in step never hang;
// a dead or stuck claimer costs at most the wait bound; an object planted
// under the claimed key is refused.
#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>
#include <npucache/ops.h>

#include "coord/job_report.h"
#include "format/object_file.h"
#include "mpi/comm.h"
#include "storage/claims.h"
#include "storage/store.h"
#include "support/mpi_temp_dir_test.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

const mpi::Step& kTest = testing_support::kMpiTestStep;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A data-parallel replica's method: the same computation on every rank.
struct Replica : nn::Module {
  Tensor run(const Tensor& x) const { return ops::relu(x) * 2.0 + 1.0; }
};

Tensor batch_of(int64_t b) {
  std::vector<float> v;
  for (int64_t i = 0; i < b * 3; ++i) v.push_back(static_cast<float>(i % 5) - 1.5f);
  return Tensor::from_vector(v, {b, 3});
}

std::vector<float> expected_of(int64_t b) {
  std::vector<float> v;
  for (int64_t i = 0; i < b * 3; ++i) v.push_back(std::max(0.0f, static_cast<float>(i % 5) - 1.5f) * 2.0f + 1.0f);
  return v;
}

// A process that holds the claim on `key` in `dir` (a raw flock on the
// claim's file, as another rank's compile would) until it is killed.
class Holder {
 public:
  Holder(const std::string& dir, const std::string& key) {
    const std::string path = (fs::path(dir) / "locks" / storage::Claim::file_name(key)).string();
    int p[2];
    if (pipe(p) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      close(p[0]);
      const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
      const char ok = fd >= 0 && flock(fd, LOCK_EX) == 0 ? '1' : '0';
      (void)!write(p[1], &ok, 1);
      for (;;) pause();
    }
    close(p[1]);
    char ok = '0';
    (void)!read(p[0], &ok, 1);
    close(p[0]);
    if (ok != '1') throw std::runtime_error("the holder could not lock " + path);
  }
  // Kills the holder (SIGKILL: no cleanup of its own; the kernel drops its lock).
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  ~Holder() { kill_now(); }

 private:
  pid_t pid_ = -1;
};

class Shapes : public testing_support::MpiTempDirTest {
 protected:
  Shapes() : MpiTempDirTest("shapes") {}
  void TearDown() override {
    set_current_communicator(nullptr);
    MpiTempDirTest::TearDown();
  }

  CacheOptions options(const std::string& dir, const std::string& method) const {
    CacheOptions o;
    o.cache_dir = dir;
    o.compile.method_name = method;
    o.compile.dynamic.reset();  // automatic dynamic: a changed size turns dynamic on a later call
    CompilerConfig c;
    c.autotune_candidates = 2;
    c.autotune_min_time_us = 0;
    o.compile.config = c;
    return o;
  }
  dist::CoordinatorOptions bounds(double wait_s) const {
    dist::CoordinatorOptions co;
    co.timeout_s = 60;
    co.shape_wait_s = wait_s;
    co.shape_poll_s = 0.02;
    return co;
  }

  // The later-call records of this rank.
  static std::vector<MethodReport> later_records() {
    std::vector<MethodReport> out;
    for (const auto& r : dist::reports())
      if (!r.later.empty()) out.push_back(r);
    return out;
  }
  // Every rank's strings.
  std::vector<std::string> gather(const std::string& mine) const { return mpi::Comm::world().allgather(mine, kTest); }
  int total(int mine) const {
    int n = 0;
    for (const auto& s : gather(std::to_string(mine))) n += std::stoi(s);
    return n;
  }
  static bool compiled_here(const MethodReport& r) {
    return r.later == "compiled" || r.later == "waited_then_compiled";
  }
};

// Tensor and pipeline parallel (4 ranks: tp 2 x pp 2; 8 ranks: tp 2 x pp
// 4), in step: the prompt and decode of batch 1, then of batch 3, which
// makes the batch dynamic. Each unique graph of the new shape compiles
// once in the job (the tp ranks of a stage share it), the others load it,
// run the same bytes, and every rank's report counts the later call.
TEST_F(Shapes, TensorAndPipelineRanksCompileEachNewGraphOnce) {
  const int tp = world % 2 == 0 ? 2 : 1;
  int pp = 1;
  while (pp * 2 <= 4 && world % (tp * pp * 2) == 0) pp *= 2;
  auto comm = make_mpi_communicator(tp, pp);
  set_current_communicator(comm.get());
  models::TinyLlama model(models::TinyLlamaConfig{}, models::stage_ranks(*comm));
  const std::string dir = base + "/cache";
  auto prompt = dist::cache_compile(model, &models::TinyLlama::prompt, options(dir, "prompt"), bounds(30));
  auto decode = dist::cache_compile(model, &models::TinyLlama::decode, options(dir, "decode"), bounds(30));
  for (int64_t b : {1, 3}) {
    auto kv = model.make_kv_cache(b);
    std::vector<int64_t> t, p, tok, pos;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t s = 0; s < 6; ++s) {
        t.push_back(1 + s + i);
        p.push_back(s);
      }
    for (int64_t i = 0; i < b; ++i) {
      tok.push_back(7);
      pos.push_back(6);
    }
    prompt(Tensor::from_vector_i64(t, {b, 6}), Tensor::from_vector_i64(p, {b, 6}), kv);
    decode(Tensor::from_vector_i64(tok, {b, 1}), Tensor::from_vector_i64(pos, {b, 1}), kv);
    Platform::get().device(current_device()).synchronize();
  }
  const auto later = later_records();
  ASSERT_EQ(later.size(), 2u) << "a later-call record for each method's new shape";
  std::string mine;
  int compiles = 0;
  for (const auto& r : later) {
    mine += r.method + " " + r.graph_key + " " + r.later + " " + r.artifact_checksum + "\n";
    compiles += compiled_here(r);
    EXPECT_NE(r.later, "waited_then_compiled") << "no claimer failed, so nobody should wait out its bound";
  }
  std::map<std::string, std::set<std::string>> checksums;  // graph key -> bytes run
  std::map<std::string, int> compiled;                     // graph key -> compiles in the job
  for (const auto& s : gather(mine)) {
    std::istringstream in(s);
    std::string method, key, how, sum;
    while (in >> method >> key >> how >> sum) {
      checksums[key].insert(sum);
      compiled[key] += how == "compiled" || how == "waited_then_compiled";
    }
  }
  const int kinds = pp == 1 ? 1 : pp == 2 ? 2 : 3;  // first, middle, last stage
  EXPECT_EQ(static_cast<int>(compiled.size()), 2 * kinds) << "unique graphs of the new shape";
  for (const auto& [key, n] : compiled) {
    EXPECT_EQ(n, 1) << "graph " << key << " compiled " << n << " times in the job";
    EXPECT_EQ(checksums[key].size(), 1u) << "every rank of graph " << key << " runs the same bytes";
  }
  EXPECT_EQ(total(compiles), 2 * kinds);
}

// Data-parallel replicas are not in step: ranks 0 and 2 (mod 4) reach the
// new batch at once, rank 1 a moment later, rank 3 never. One compile for
// the job; nobody waits for a rank that never claimed; every rank ends
// well within the bound.
TEST_F(Shapes, ReplicasNotInStepNeverHangAndCompileOnce) {
  const std::string dir = base + "/cache";
  Replica m;
  auto f = dist::cache_compile(m, &Replica::run, options(dir, "run"), bounds(20));
  EXPECT_EQ(f(batch_of(1)).to_vector(), expected_of(1));  // the first call: coordinated, all ranks
  const double t0 = now_s();
  if (rank % 4 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  if (rank % 4 != 3) {
    EXPECT_EQ(f(batch_of(3)).to_vector(), expected_of(3));
    EXPECT_EQ(f(batch_of(5)).to_vector(), expected_of(5));  // the dynamic graph: no new compile
  } else {
    EXPECT_EQ(f(batch_of(1)).to_vector(), expected_of(1));
  }
  // A rank that waited for rank 3, which never claims, would wait out the
  // 20 s bound; half of it tells that apart from a slow compile on a
  // loaded machine (9.7 s seen beside CI's other work).
  const double took = now_s() - t0;
  EXPECT_LT(took, 10.0) << "a rank's later calls took " << took << " s (the bound is 20 s)";
  const auto later = later_records();
  ASSERT_EQ(later.size(), rank % 4 == 3 ? 0u : 1u);
  int compiles = 0;
  for (const auto& r : later) {
    compiles += compiled_here(r);
    EXPECT_NE(r.later, "waited_then_compiled");
    EXPECT_LT(r.later_wait_s, 5.0);
  }
  EXPECT_EQ(total(compiles), 1) << "one compile of the new shape for the job";
  // The job report counts the later calls apart from the first calls.
  const coord::RankReport mine = coord::local_rank_report(rank, {});
  EXPECT_EQ(mine.methods.size(), 1u) << "the first call is the only rank-method";
  EXPECT_EQ(mine.later.total(), rank % 4 == 3 ? 0 : 1);
  const auto job = coord::gather_job_report(coord::JobInfo{}, mine, 60);
  if (rank == 0) {
    ASSERT_TRUE(job);
    int reaching = 0;
    for (int r = 0; r < world; ++r) reaching += r % 4 != 3;
    EXPECT_EQ(job->later.total(), reaching);
    EXPECT_EQ(job->later.compiled + job->later.waited_then_compiled, 1);
    EXPECT_EQ(job->rank_methods(), static_cast<std::size_t>(world));
  }
}

// A claim nobody holds (a killed process's file, or a planted one) claims
// nothing; a claimer killed while the others wait costs them the time until
// its death (then one compiles, the rest load); one that holds on costs
// each waiter at most shape_wait_s, then it compiles.
TEST_F(Shapes, DeadStaleOrStuckClaimersCostAtMostTheBound) {
  Replica m;
  // The graph key of the new shape, from a run of its own.
  std::string key;
  {
    auto f = dist::cache_compile(m, &Replica::run, options(base + "/learn", "run"), bounds(20));
    f(batch_of(1));
    f(batch_of(3));
    const auto later = later_records();
    ASSERT_EQ(later.size(), 1u);
    key = later[0].graph_key;
    for (const auto& k : gather(key)) ASSERT_EQ(k, key) << "replicas trace the same graph";
  }
  struct Case {
    const char* name;
    double wait_s;  // CoordinatorOptions::shape_wait_s
    double kill_s;  // the holder dies after this (negative: no holder, a stale file only)
  };
  int round = 0;
  for (const Case c :
       {Case{"stale claim file", 3.0, -1.0}, Case{"claimer killed", 10.0, 1.0}, Case{"claimer stuck", 1.0, 100.0}}) {
    SCOPED_TRACE(c.name);
    dist::clear_reports();
    const std::string dir = base + "/case" + std::to_string(round++);
    auto f = dist::cache_compile(m, &Replica::run, options(dir, "run"), bounds(c.wait_s));
    EXPECT_EQ(f(batch_of(1)).to_vector(), expected_of(1));
    std::optional<Holder> holder;
    if (rank == 0) {
      if (c.kill_s < 0)
        std::ofstream(fs::path(dir) / "locks" / storage::Claim::file_name(key)) << "planted";
      else
        holder.emplace(dir, key);
    }
    mpi::Comm::world().barrier(kTest);
    const double t0 = now_s();
    if (rank == 0) {
      if (holder) {
        while (now_s() - t0 < std::min(c.kill_s, c.wait_s + 1.5))
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        holder->kill_now();
      }
    } else {
      EXPECT_EQ(f(batch_of(3)).to_vector(), expected_of(3));
    }
    const double took = now_s() - t0;
    mpi::Comm::world().barrier(kTest);
    const auto later = later_records();
    int compiles = 0;
    for (const auto& r : later) {
      compiles += compiled_here(r);
      if (c.kill_s < 0) {
        EXPECT_LT(r.later_wait_s, 0.5) << "a stale claim file made a rank wait";
      }
      if (c.kill_s > 0 && c.kill_s < c.wait_s) {
        EXPECT_NE(r.later, "compiled") << "the holder's claim was ignored";
        EXPECT_GE(r.later_wait_s, c.kill_s - 0.1);
        EXPECT_LT(r.later_wait_s, c.wait_s);
      }
      if (c.kill_s > c.wait_s) {
        // Each waiter waits out its bound, then compiles; one whose poll
        // finds the object a waiter that timed out first stored loads it.
        EXPECT_TRUE(r.later == "waited_then_compiled" || r.later == "loaded") << r.later;
        EXPECT_GE(r.later_wait_s, r.later == "loaded" ? 0.8 * c.wait_s : c.wait_s - 0.05);
        EXPECT_LT(took, c.wait_s + 3.0) << "a rank waited " << took << " s past a " << c.wait_s << " s bound";
      }
    }
    if (rank != 0) {
      EXPECT_EQ(later.size(), 1u);
    }
    const int all = total(compiles);
    if (c.kill_s > c.wait_s) {
      EXPECT_GE(all, 1) << "a waiter compiles after the bound";
      EXPECT_LE(all, world - 1);
    } else {
      EXPECT_EQ(all, 1) << "one compile once the claim is free";
    }
  }
}

// An object of another computation planted under the claimed key (an
// honest object of the first call's graph, its key rewritten and the file
// written anew, every checksum the writer's) is refused by the identity
// rule while the ranks wait: they compile after the claimer dies and run
// the right program, never the planted one.
TEST_F(Shapes, AnObjectPlantedUnderTheClaimedKeyIsRefused) {
  Replica m;
  std::string key;
  {
    auto f = dist::cache_compile(m, &Replica::run, options(base + "/learn", "run"), bounds(20));
    f(batch_of(1));
    f(batch_of(3));
    key = later_records().at(0).graph_key;
  }
  dist::clear_reports();
  const std::string dir = base + "/planted";
  auto f = dist::cache_compile(m, &Replica::run, options(dir, "run"), bounds(10));
  EXPECT_EQ(f(batch_of(1)).to_vector(), expected_of(1));
  const std::string first_key = dist::reports().at(0).graph_key;
  std::optional<Holder> holder;
  std::string planted_sum;
  if (rank == 0) {
    // the rewritten object's checksums are its writer's: it decodes, and
    // only its own trace says it is another computation
    holder.emplace(dir, key);
    format::ObjectRecord o = storage::Store::open(dir, storage::Create::no).object(first_key);
    o.graph_key = key;
    planted_sum = o.meta.checksum;
    std::ofstream(fs::path(dir) / "objects" / (key + ".h5"), std::ios::binary) << format::encode_object(o);
  }
  mpi::Comm::world().broadcast(planted_sum, 0, kTest);
  mpi::Comm::world().barrier(kTest);
  const double t0 = now_s();
  if (rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    holder->kill_now();
  } else {
    EXPECT_EQ(f(batch_of(3)).to_vector(), expected_of(3));
  }
  mpi::Comm::world().barrier(kTest);
  for (const auto& r : later_records()) {
    EXPECT_NE(r.artifact_checksum, planted_sum) << "the planted object was served";
    EXPECT_GE(r.later_wait_s, 0.7) << "a rank took the planted object instead of waiting: " << r.later;
  }
  const auto later = later_records();
  EXPECT_EQ(total(static_cast<int>(later.size())), world - 1);
  int compiles = 0;
  for (const auto& r : later) compiles += compiled_here(r);
  EXPECT_EQ(total(compiles), 1);
  if (rank == 0) {
    const format::ObjectRecord kept = storage::Store::open(dir, storage::Create::no).object(key);
    EXPECT_NE(kept.meta.checksum, planted_sum) << "the planted object was kept";
  }
  (void)t0;
}

}  // namespace

namespace {

// The wait bounds are checked when the function is built: a wait that is
// not a positive, finite number, or a poll longer than the wait, is a
// ConfigError naming the options.
TEST_F(Shapes, BadWaitBoundsAreConfigErrors) {
  Replica m;
  for (const auto& [wait, poll] : std::vector<std::pair<double, double>>{
           {0.0, 0.05}, {-1.0, 0.05}, {std::numeric_limits<double>::infinity(), 0.05}, {1.0, 0.0}, {1.0, 2.0}}) {
    dist::CoordinatorOptions co;
    co.shape_wait_s = wait;
    co.shape_poll_s = poll;
    try {
      (void)dist::cache_compile(m, &Replica::run, options(base + "/bad", "run"), co);
      ADD_FAILURE() << "wait " << wait << ", poll " << poll << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("shape_wait_s"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
