// The store against a failing outside world, through the Env seam
// (process/env.h, tests/support/fault_env.h): for a real commit of a cold
// cache_compile, every write, fsync, rename, link, file creation and close
// it makes is failed in turn (ENOSPC: the disk stays full from there on;
// EIO: that one call fails), and for a warm load every read is failed,
// shortened or cut at the end of the file. Each time: cache_compile does not
// throw and computes the right result; a failed save is warned about with
// the system's reason; the cache as it was (an earlier entry of the same
// model, in the same index file) still loads warm, in this process and in a
// new one; `verify` finds nothing wrong; no temporary is left; and the next
// run rebuilds what was not saved, after which the entry is a hit.
//
// The binary is also its own worker process: `test_storage --warm DIR
// METHOD` runs one method of the model below against DIR and prints what
// happened.
#include <npucache/cache.h>
#include <npucache/error.h>
#include <npucache/models/models.h>

#include "admin/admin.h"
#include "log/log.h"
#include "process/context.h"
#include "storage/commit_queue.h"
#include "storage/stats.h"
#include "support/cache_files.h"
#include "support/fault_env.h"
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace npucache;
using testing_support::Fault;
using testing_support::FaultEnv;
using testing_support::FileOp;
using testing_support::has;
using testing_support::Out;
using testing_support::sh;
namespace fs = std::filesystem;

namespace {

// Methods of one model: the same model_info, so their entries live in one
// index file (a commit of `later` or `twin` rewrites the file holding
// `prompt`'s entry). `later` is another graph, so its commit publishes an
// object of its own; `twin` is `prompt`'s graph under another name, so it
// reads and reuses `prompt`'s object and commits only its entry.
struct FaultModel : models::SeedExample {
  std::string type_name() const override { return "FaultModel"; }
  Tensor prompt(const models::InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv); }
  Tensor later(const models::InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv) * 3.0f; }
  Tensor twin(const models::InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv); }
};

enum class Method { prompt, later, twin };
using MethodFn = Tensor (FaultModel::*)(const models::InputMeta&, const std::vector<Tensor>&);

MethodFn method_fn(Method m) {
  return m == Method::prompt ? &FaultModel::prompt : m == Method::later ? &FaultModel::later : &FaultModel::twin;
}

const char* method_name(Method m) { return m == Method::prompt ? "prompt" : m == Method::later ? "later" : "twin"; }

std::pair<models::InputMeta, std::vector<Tensor>> inputs() {
  return {models::InputMeta{Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}), true},
          {Tensor::from_vector({0.5f, 0.5f, 1, 1, 2, 2}, {3, 2})}};
}

std::vector<float> eager(Method m) {
  FaultModel model;
  auto [x, kv] = inputs();
  return (model.*method_fn(m))(x, kv).to_vector();
}

struct Result {
  std::vector<float> result;
  CallStatus status;
};

// The method's first call against `dir`, with the commits it queued done
// (after `before_commits`, when given).
Result run_method(const fs::path& dir, Method m, const std::function<void()>& before_commits = {}) {
  FaultModel model;
  CacheOptions o;
  o.cache_dir = dir.string();
  o.compile.method_name = method_name(m);
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  auto fn = cache_compile(model, method_fn(m), o);
  auto [x, kv] = inputs();
  Result r;
  r.result = fn(x, kv).to_vector();
  if (before_commits) before_commits();
  cache::wait_for_commits();
  r.status = fn.status();
  return r;
}

std::string text(const Result& r) {
  std::string s = "outcome " + std::string(outcome_name(r.status.outcome)) + "\ncached " +
                  (r.status.cached ? "1" : "0") + "\ncompiles " + std::to_string(r.status.compiles) + "\nreason " +
                  r.status.reason + "\nresult";
  for (float v : r.result) s += " " + std::to_string(v);
  return s + "\n";
}

// The warnings the library logs while it lives.
class Warnings {
 public:
  Warnings() : sink_(std::make_shared<Sink>()) { log::get().sinks().push_back(sink_); }
  ~Warnings() {
    auto& sinks = log::get().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  Warnings(const Warnings&) = delete;
  Warnings& operator=(const Warnings&) = delete;
  std::string all() const {
    std::lock_guard lock(sink_->mu);
    return sink_->text;
  }
  void clear() {
    std::lock_guard lock(sink_->mu);
    sink_->text.clear();
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    std::mutex mu;
    std::string text;
    void sink_it_(const spdlog::details::log_msg& m) override {
      if (m.level < spdlog::level::warn) return;
      std::lock_guard lock(mu);
      text.append(m.payload.data(), m.payload.size());
      text += "\n";
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
};

// Temporaries (".<name>.tmp.<pid>.<n>") anywhere under `dir`.
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (has(f.path().filename().string(), ".tmp.")) out.push_back(f.path().string());
  return out;
}

std::string problems(const fs::path& dir) {
  const auto v = cache::admin::verify(dir.string(), false);
  std::string s;
  for (const auto& [what, why] : v.bad) s += what + ": " + why + "\n";
  return s;
}

// This binary as a new process: the warm load of `m` against `dir`.
Out in_new_process(const fs::path& dir, Method m) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {127, "no /proc/self/exe"};
  return sh(std::string(self, static_cast<std::size_t>(n)) + " --warm " + dir.string() + " " + method_name(m));
}

// Its caches are directories of `base`, named by each test.
class Faults : public testing_support::TempDirTest {
 protected:
  Faults() : TempDirTest("faults") {}
  // A cache holding `m`'s entry, made with the real Env.
  fs::path cache_with(Method m, const std::string& name) {
    const fs::path d = base / name;
    process::Context::Scope scope;
    const Result r = run_method(d, m);
    EXPECT_TRUE(r.status.cached) << text(r);
    return d;
  }
  // A copy of `from` (its own path: the process keeps decoded indexes by
  // path, so each copy is read from its files).
  fs::path copy_of(const fs::path& from, const std::string& name) {
    const fs::path d = base / name;
    fs::remove_all(d);
    fs::copy(from, d, fs::copy_options::recursive);
    return d;
  }
  Warnings warnings;  // added to the logger once per test, not per run
};

// What a cache holds: its entries (path -> graph key and the checksum of
// the object bytes they record) and its objects (name -> inode: an object
// is published once and never replaced unless it is damaged).
struct Held {
  std::map<std::string, std::string> entries;
  std::map<std::string, ino_t> objects;
};

// The entries are read from `entries_of` (the process keeps decoded
// indexes: reading a copy's index here would spare the run under test its
// read), the objects' inodes from `d`.
Held held(const fs::path& d, const fs::path& entries_of) {
  Held h;
  for (const auto& e : testing_support::entries(entries_of.string()))
    h.entries[e.path] = e.graph_key + " " + e.object_checksum;
  if (fs::exists(d / "objects"))
    for (const auto& f : fs::directory_iterator(d / "objects")) {
      struct stat st;
      const std::string name = f.path().filename().string();
      if (name[0] != '.' && ::lstat(f.path().c_str(), &st) == 0) h.objects[name] = st.st_ino;
    }
  return h;
}

// Everything `before` held is still there: the same entries, recording the
// same objects, and the same object files.
void expect_still_holds(const fs::path& d, const Held& before) {
  const Held now = held(d, d);
  for (const auto& [path, what] : before.entries) {
    const auto it = now.entries.find(path);
    EXPECT_TRUE(it != now.entries.end() && it->second == what) << "entry " << path << " lost or changed";
  }
  for (const auto& [name, ino] : before.objects) {
    const auto it = now.objects.find(name);
    EXPECT_TRUE(it != now.objects.end() && it->second == ino) << "object " << name << " removed or replaced";
  }
}

// What a faulted run must leave: the earlier cache whole (its entries and
// objects) and its entry loading warm (here and in a new process), nothing
// reported by verify, no temporary; then the faulted method is rebuilt and
// is a hit on the run after.
void expect_intact_then_rebuilt(const fs::path& d, const Held& before, Method earlier, Method faulted,
                                const std::string& context) {
  SCOPED_TRACE(context);
  EXPECT_TRUE(temporaries(d).empty()) << "left " << temporaries(d).front();
  expect_still_holds(d, before);
  EXPECT_EQ(problems(d), "");
  Out warm_process = in_new_process(d, earlier);
  EXPECT_EQ(warm_process.status, 0) << warm_process.text;
  EXPECT_TRUE(has(warm_process.text, "outcome hit\ncached 1\ncompiles 0\nreason \n")) << warm_process.text;
  process::Context::Scope real;
  const Result warm = run_method(d, earlier);
  EXPECT_EQ(warm.status.outcome, Outcome::hit) << text(warm);
  EXPECT_EQ(warm.status.reason, "") << text(warm);
  EXPECT_EQ(warm.result, eager(earlier));
  const Result again = run_method(d, faulted);  // the faulted one: hit, or rebuilt and saved
  EXPECT_TRUE(again.status.cached) << text(again);
  EXPECT_EQ(again.result, eager(faulted));
  const Result hit = run_method(d, faulted);
  EXPECT_EQ(hit.status.outcome, Outcome::hit) << text(hit);
  EXPECT_EQ(hit.status.reason, "") << text(hit);
  EXPECT_EQ(problems(d), "");
}

struct CommitCase {
  FileOp op;
  int error;
  bool sticky;  // every later call of the kind fails too (a disk that stays full)
  // The calls faulted: the cache directory's, or those on paths holding
  // this (closes: of the files written, not of those read).
  const char* only = nullptr;
  Method method = Method::later;  // what the faulted run compiles (or reuses) and commits
};

std::string case_name(const ::testing::TestParamInfo<CommitCase>& i) {
  return std::string(testing_support::op_name(i.param.op)) + "_" + (i.param.error == ENOSPC ? "ENOSPC" : "EIO") +
         (i.param.sticky && i.param.error != ENOSPC ? "_from_then_on" : "") +
         (i.param.method == Method::twin ? "_entry_only" : "");
}

void PrintTo(const CommitCase& c, std::ostream* os) {
  *os << testing_support::op_name(c.op) << " failing with " << std::strerror(c.error)
      << (c.sticky ? " from then on" : "") << " in a commit of " << method_name(c.method);
}

class CommitFaults : public Faults, public ::testing::WithParamInterface<CommitCase> {};

}  // namespace

// Every call of the kind that a cold compile's commit makes, failed in turn.
TEST_P(CommitFaults, EveryFailedCallKeepsThePreviousCacheAndRunsUncached) {
  const CommitCase c = GetParam();
  const fs::path pristine = cache_with(Method::prompt, "pristine");
  const std::vector<float> want = eager(c.method);
  // `later` compiles; `twin` is served by `prompt`'s object.
  const Outcome cold = c.method == Method::later ? Outcome::compiled : Outcome::hit;
  // The calls of the commit, counted on a copy (twice: the count is the
  // same on every run, or the sweep below would miss calls).
  std::size_t calls = 0;
  for (int round = 0; round < 2; ++round) {
    const fs::path d = copy_of(pristine, "count" + std::to_string(round));
    auto env = std::make_shared<FaultEnv>();
    {
      process::Context::Scope scope(env);
      const Result r = run_method(d, c.method);
      ASSERT_EQ(r.status.outcome, cold) << text(r);
      ASSERT_TRUE(r.status.cached) << text(r);
    }
    const std::size_t n = env->count(c.op, c.only ? c.only : d.string());
    if (round == 1) {
      EXPECT_EQ(n, calls) << "the commit's " << testing_support::op_name(c.op) << " calls vary";
    }
    calls = n;
    fs::remove_all(d);
  }
  if (calls == 0) GTEST_SKIP() << "a commit makes no " << testing_support::op_name(c.op) << " call";
  std::printf("the commit makes %zu %s calls\n", calls, std::string(testing_support::op_name(c.op)).c_str());
  for (std::size_t n = 1; n <= calls; ++n) {
    const std::string at = std::string(testing_support::op_name(c.op)) + " " + std::to_string(n) + " of " +
                           std::to_string(calls) + " failed with " + std::strerror(c.error);
    const fs::path d = copy_of(pristine, "c" + std::to_string(n));
    const Held before = held(d, pristine);
    auto env = std::make_shared<FaultEnv>();
    Fault f = Fault::fail(c.op, n, c.error, c.only ? c.only : d.string());
    if (c.sticky) f.times = 0;
    env->arm(f);
    warnings.clear();
    Result r;
    {
      process::Context::Scope scope(env);
      EXPECT_NO_THROW(r = run_method(d, c.method)) << at;
    }
    const auto hit = env->faulted();
    ASSERT_FALSE(hit.empty()) << at << ": no call was failed\n" << env->describe();
    EXPECT_EQ(r.result, want) << at;
    // A twin whose read of the stored object failed compiles instead.
    if (r.status.outcome != Outcome::compiled) {
      EXPECT_EQ(r.status.outcome, cold) << at << "\n" << text(r);
    }
    EXPECT_TRUE(has(warnings.all(), std::strerror(c.error))) << at << " (" << hit.front().path << "): not warned\n"
                                                             << warnings.all();
    expect_intact_then_rebuilt(d, before, Method::prompt, c.method, at + " (" + hit.front().path + ")");
    if (HasFailure()) {
      ADD_FAILURE() << "calls of the faulted run:\n" << env->describe();
      return;
    }
    fs::remove_all(d);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Store, CommitFaults,
    ::testing::Values(CommitCase{FileOp::write, ENOSPC, true}, CommitCase{FileOp::write, EIO, false},
                      CommitCase{FileOp::create, ENOSPC, true}, CommitCase{FileOp::create, EIO, false},
                      CommitCase{FileOp::fsync, EIO, false}, CommitCase{FileOp::fsync, ENOSPC, false},
                      CommitCase{FileOp::close, EIO, false, ".tmp."}, CommitCase{FileOp::rename, EIO, false},
                      CommitCase{FileOp::rename, ENOSPC, true}, CommitCase{FileOp::link, EIO, false},
                      CommitCase{FileOp::link, ENOSPC, true}, CommitCase{FileOp::read, EIO, false},
                      CommitCase{FileOp::read, EIO, true},
                      CommitCase{FileOp::write, ENOSPC, true, nullptr, Method::twin},
                      CommitCase{FileOp::fsync, EIO, false, nullptr, Method::twin},
                      CommitCase{FileOp::rename, EIO, false, nullptr, Method::twin},
                      CommitCase{FileOp::read, EIO, false, nullptr, Method::twin},
                      CommitCase{FileOp::read, EIO, true, nullptr, Method::twin}),
    case_name);

namespace {

struct LoadCase {
  const char* name;
  Fault fault;  // its nth and pattern are set for each call in turn
};

void PrintTo(const LoadCase& c, std::ostream* os) { *os << c.name; }

class LoadFaults : public Faults, public ::testing::WithParamInterface<LoadCase> {};

Fault failing(FileOp op, int error, bool sticky = false) {
  Fault f = Fault::fail(op, 1, error);
  if (sticky) f.times = 0;
  return f;
}

}  // namespace

// Every read (and open, and stat) of a warm load failed, shortened or cut
// short in turn: a hit (a short read is completed) or a miss with its
// reason, never a crash or a wrong result; what was missed is rebuilt, the
// cache is clean, and the next run is a hit.
TEST_P(LoadFaults, EveryFaultyReadIsAHitOrAMissWithItsReason) {
  const LoadCase c = GetParam();
  const fs::path pristine = cache_with(Method::prompt, "pristine");
  const std::vector<float> want = eager(Method::prompt);
  std::size_t calls = 0;
  for (int round = 0; round < 2; ++round) {
    const fs::path d = copy_of(pristine, "count" + std::to_string(round));
    auto env = std::make_shared<FaultEnv>();
    {
      process::Context::Scope scope(env);
      const Result r = run_method(d, Method::prompt);
      ASSERT_EQ(r.status.outcome, Outcome::hit) << text(r);
    }
    const std::size_t n = env->count(c.fault.op, d.string());
    if (round == 1) {
      EXPECT_EQ(n, calls) << "a warm load's " << testing_support::op_name(c.fault.op) << " calls vary";
    }
    calls = n;
    fs::remove_all(d);
  }
  ASSERT_GT(calls, 0u);
  std::printf("a warm load makes %zu %s calls in the cache directory\n", calls,
              std::string(testing_support::op_name(c.fault.op)).c_str());
  for (std::size_t n = 1; n <= calls; ++n) {
    const std::string at = std::string(c.name) + " at " + std::string(testing_support::op_name(c.fault.op)) + " " +
                           std::to_string(n) + " of " + std::to_string(calls);
    const fs::path d = copy_of(pristine, "c" + std::to_string(n));
    const Held before = held(d, pristine);
    auto env = std::make_shared<FaultEnv>();
    Fault f = c.fault;
    f.nth = n;
    f.pattern = d.string();
    env->arm(f);
    Result r;
    {
      process::Context::Scope scope(env);
      EXPECT_NO_THROW(r = run_method(d, Method::prompt)) << at;
    }
    const auto hit = env->faulted();
    ASSERT_FALSE(hit.empty()) << at << ": no call was faulted\n" << env->describe();
    const std::string where = at + " (" + hit.front().path + ")";
    EXPECT_EQ(r.result, want) << where;
    if (r.status.outcome != Outcome::hit) {
      EXPECT_FALSE(r.status.reason.empty()) << where << ": a miss without a reason\n" << text(r);
    }
    {
      SCOPED_TRACE(where);
      EXPECT_TRUE(temporaries(d).empty());
      expect_still_holds(d, before);
      EXPECT_EQ(problems(d), "");
      process::Context::Scope real;
      const Result again = run_method(d, Method::prompt);  // rebuilt if it was missed: a hit at the latest now
      EXPECT_TRUE(again.status.cached) << text(again);
      EXPECT_EQ(again.result, want);
      const Result last = run_method(d, Method::prompt);
      EXPECT_EQ(last.status.outcome, Outcome::hit) << text(last);
      EXPECT_EQ(last.status.reason, "") << text(last);
      EXPECT_EQ(problems(d), "");
    }
    if (HasFailure()) {
      ADD_FAILURE() << "calls of the faulted run:\n" << env->describe();
      return;
    }
    fs::remove_all(d);
  }
}

INSTANTIATE_TEST_SUITE_P(Store, LoadFaults,
                         ::testing::Values(LoadCase{"EIO", failing(FileOp::read, EIO)},
                                           LoadCase{"EIO_from_then_on", failing(FileOp::read, EIO, true)},
                                           LoadCase{"short", Fault::short_read(1)},
                                           LoadCase{"end_of_file", Fault::end_of_file(1)},
                                           LoadCase{"open_EIO", failing(FileOp::open, EIO)},
                                           LoadCase{"open_EACCES", failing(FileOp::open, EACCES)},
                                           LoadCase{"stat_EIO", failing(FileOp::stat, EIO)}),
                         [](const ::testing::TestParamInfo<LoadCase>& i) { return std::string(i.param.name); });

// A call path opens its cache directory's store once for its reads and
// once for its writes (a write checks the directory as a fresh process
// would): a cold miss (look up, find no stored object, read the tuning
// table and the profile, compile; then commit the object, the entry and
// the tuning table, the size limit) twice, a warm hit once. Each open is an
// openat of the directory itself (opens of files in it are other calls);
// the statistics, written once per process when it flushes them, open it
// once more.
TEST_F(Faults, ACallPathOpensTheStoreOnceToReadAndOnceToWrite) {
  const fs::path pristine = cache_with(Method::prompt, "pristine");
  auto opens_of = [](const FaultEnv& env, const fs::path& d) {
    std::size_t n = 0;
    for (const auto& c : env.calls())
      if (c.op == FileOp::open && fs::path(c.path).lexically_normal() == d.lexically_normal()) ++n;
    return n;
  };
  for (const Method m : {Method::later, Method::prompt}) {
    const fs::path d = copy_of(pristine, std::string("opens-") + method_name(m));
    auto env = std::make_shared<FaultEnv>();
    process::Context::Scope scope(env);
    const std::size_t want = m == Method::later ? 2 : 1;
    const Result r =
        run_method(d, m, [&] { EXPECT_EQ(opens_of(*env, d), want) << method_name(m) << "\n"
                                                                  << env->describe(); });
    EXPECT_EQ(r.status.outcome, m == Method::later ? Outcome::compiled : Outcome::hit) << text(r);
    cache::flush_stats();
    EXPECT_EQ(opens_of(*env, d), want + 1) << method_name(m) << ": the statistics' flush\n" << env->describe();
  }
}

// `test_storage --warm DIR METHOD`: one run in a process of its own.
int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--warm") {
    try {
      const std::string m = argv[3];
      const Result r = run_method(argv[2], m == "later" ? Method::later : m == "twin" ? Method::twin : Method::prompt);
      std::fputs(text(r).c_str(), stdout);
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
