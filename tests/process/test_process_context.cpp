// The process context as a serving program meets it (include/npucache/
// process.h, src/process/context.h): a cache directory attacked between two
// first calls of one process, or between a first call's lookup and its
// save; a ProcessContext the program owns (statistics written, background
// commits finished when it ends, two in sequence, a compiled method used
// after its context ended); exit() while another thread is in a first call;
// many first calls at once making the process's services; an object
// adopted from another writer run and recorded. The model and its compile
// hook: tests/process/process_models.h; processes of their own:
// process_worker.cpp.
#include <npucache/npucache.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "compiler/serialize.h"
#include "format/names.h"
#include "process/context.h"
#include "process/process_models.h"
#include "storage/commit_queue.h"
#include "storage/store.h"
#include "support/cache_files.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

using namespace npucache;
namespace fs = std::filesystem;
using testing_support::compile_hook;
using testing_support::has;
using testing_support::Hooked;
using testing_support::hooked_input;
using testing_support::hooked_options;
using testing_support::Out;
using testing_support::sh;

namespace {

constexpr uid_t kOtherUid = 4242;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Every file and link under `dir` with its bytes or target (links are not
// followed): a snapshot to compare.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    const std::string name = fs::relative(p, dir).string();
    if (fs::is_symlink(fs::symlink_status(p)))
      out[name] = "-> " + fs::read_symlink(p).string();
    else if (fs::is_regular_file(fs::symlink_status(p)))
      out[name] = slurp(p);
    else
      out[name + "/"] = "";
  }
  return out;
}

// The names that differ between two snapshots (added, removed or changed).
std::string changed(const std::map<std::string, std::string>& before, const std::map<std::string, std::string>& after) {
  std::string out;
  for (const auto& [name, bytes] : after)
    if (auto it = before.find(name); it == before.end() || it->second != bytes) out += name + " ";
  for (const auto& [name, bytes] : before)
    if (!after.count(name)) out += "-" + name + " ";
  return out;
}

std::vector<float> eager_f(double k = 1.0) {
  Hooked m(k);
  return m.f(hooked_input()).to_vector();
}
std::vector<float> eager_g(double k = 1.0) {
  Hooked m(k);
  return m.g(hooked_input()).to_vector();
}

bool close(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-5f * (1.0f + std::abs(b[i]))) return false;
  return true;
}

nlohmann::json stats_of(const fs::path& dir) {
  const std::string text = slurp(dir / storage::names::kStatsFile);
  return text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
}

uint64_t count(const nlohmann::json& j, const std::string& key) { return j.contains(key) ? j[key].get<uint64_t>() : 0; }

class ProcessContextTest : public testing_support::TempDirTest {
 protected:
  ProcessContextTest() : TempDirTest("process") {}
  void TearDown() override {
    compile_hook() = nullptr;
    TempDirTest::TearDown();
  }
  Out worker(const std::string& args) const { return sh(std::string(PROCESS_WORKER) + " " + args); }
};

bool is_root() { return ::geteuid() == 0; }

// What happens to the cache directory, and what a fresh process makes of
// it: `refused` (the method runs uncached and nothing is written
// anywhere), else the save lands in the directory the path names now.
struct Attack {
  std::string name;
  std::function<void(const fs::path& base, const fs::path& dir)> apply;
  bool refused;
  bool needs_root = false;
  fs::path cache = "cache";  // under base: the cache directory the tests use
};

void move_and_link(const fs::path& from, const fs::path& to, uid_t owner) {
  fs::rename(from, to);
  fs::create_directory_symlink(to, from);
  if (owner != ::geteuid()) {
    ASSERT_EQ(::lchown(from.c_str(), owner, owner), 0) << std::strerror(errno);
  }
}

std::vector<Attack> attacks() {
  return {
      {"removed", [](const fs::path&, const fs::path& d) { fs::remove_all(d); }, false},
      {"replaced by another directory",
       [](const fs::path& b, const fs::path& d) {
         fs::rename(d, b / "old");
         fs::create_directory(d);
         fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
       },
       false},
      {"made group-writable",
       [](const fs::path&, const fs::path& d) { fs::permissions(d, fs::perms::group_write, fs::perm_options::add); },
       true},
      {"made world-writable",
       [](const fs::path&, const fs::path& d) { fs::permissions(d, fs::perms::others_all, fs::perm_options::add); },
       true},
      {"made world-writable with the sticky bit",
       [](const fs::path&, const fs::path& d) {
         fs::permissions(d, fs::perms::others_all | fs::perms::sticky_bit, fs::perm_options::add);
       },
       false},
      {"given to another user",
       [](const fs::path&, const fs::path& d) { ASSERT_EQ(::chown(d.c_str(), kOtherUid, kOtherUid), 0); }, true, true},
      {"replaced by a link of another user to it",
       [](const fs::path& b, const fs::path& d) { move_and_link(d, b / "real", kOtherUid); }, true, true},
      {"replaced by the user's own link to it",
       [](const fs::path& b, const fs::path& d) { move_and_link(d, b / "real", ::geteuid()); }, false},
      {"a parent replaced by a link of another user",
       [](const fs::path& b, const fs::path&) { move_and_link(b / "parent", b / "parent.real", kOtherUid); }, true,
       true, "parent/cache"},
  };
}

// Runs method "a" (saved), applies the attack between the two first calls
// (or, with `mid_call`, inside the second one's compile: after its lookup,
// before its save), then method "b" of the same process; checks the second
// against a fresh process on the same directory.
void attack_one_process(const fs::path& base, const Attack& attack, bool mid_call) {
  SCOPED_TRACE(attack.name + (mid_call ? " (between lookup and save)" : " (between two first calls)"));
  fs::remove_all(base);
  fs::create_directories(base);
  fs::permissions(base, fs::perms::owner_all, fs::perm_options::replace);
  const fs::path dir = base / attack.cache;
  std::map<std::string, std::string> before;
  {
    ProcessContext own;  // the process's services as a new process has them
    Hooked m;
    auto a = cache_compile(m, &Hooked::f, hooked_options(dir.string(), "a"));
    ASSERT_TRUE(close(a(hooked_input()).to_vector(), eager_f()));
    ASSERT_TRUE(a.status().cached) << a.status().reason;
    bool fired = false;
    auto strike = [&] {
      attack.apply(base, dir);
      before = snapshot(base);
    };
    if (mid_call)
      compile_hook() = [&] {
        if (!std::exchange(fired, true)) strike();
      };
    else
      strike();
    testing::internal::CaptureStderr();
    auto b = cache_compile(m, &Hooked::g, hooked_options(dir.string(), "b"));
    const std::vector<float> got = b(hooked_input()).to_vector();
    const std::string log = testing::internal::GetCapturedStderr();
    compile_hook() = nullptr;
    if (mid_call) {
      ASSERT_TRUE(fired);
    }
    EXPECT_TRUE(close(got, eager_g()));
    EXPECT_EQ(b.status().cached, !attack.refused) << b.status().reason << "\n" << log;
    if (attack.refused) {
      EXPECT_TRUE(has(log, "refusing")) << log;
      EXPECT_EQ(changed(before, snapshot(base)), "") << "written after the attack";
    }
  }
  // A fresh process on the directory as the attack left it: the same
  // verdict; where the save was accepted, the entry is where the path
  // names now, and a new process hits it.
  Out fresh = sh(std::string(PROCESS_WORKER) + " run " + dir.string() + " b --g");
  ASSERT_EQ(fresh.status, 0) << fresh.text;
  if (attack.refused) {
    EXPECT_TRUE(has(fresh.text, "cached 0")) << fresh.text;
    EXPECT_TRUE(has(fresh.text, "refusing")) << fresh.text;
  } else {
    EXPECT_TRUE(has(fresh.text, "status hit cached 1 compiles 0")) << fresh.text;
  }
}

}  // namespace

// The cache directory removed, replaced, chmod-ed, given away or replaced
// by a link between two first calls of one process: the process decides
// as a fresh process would (the store it opened before is not trusted
// blindly), never writes into a directory it refuses or through a link of
// someone else.
TEST_F(ProcessContextTest, DirectoryAttackedBetweenTwoFirstCallsIsJudgedAsAFreshProcessWould) {
  for (const Attack& a : attacks()) {
    if (a.needs_root && !is_root()) continue;
    attack_one_process(base, a, false);
  }
}

// The same attacks after a first call's lookup, before its save.
TEST_F(ProcessContextTest, DirectoryAttackedBetweenLookupAndSaveIsJudgedAsAFreshProcessWould) {
  for (const Attack& a : attacks()) {
    if (a.needs_root && !is_root()) continue;
    attack_one_process(base, a, true);
  }
}

// A program that owns a ProcessContext: when it ends, the statistics are in
// stats.json and the background commit of an entry the remote tier served
// is finished (the next process is served locally); two contexts in
// sequence in one process each do so, and counts add up.
TEST_F(ProcessContextTest, OwnContextWritesStatisticsAndFinishesBackgroundCommitsWhenItEnds) {
  testing_support::RedisServer server;
  const fs::path warm = base / "warm";
  {
    ProcessContext own;
    Hooked m;
    CacheOptions o = hooked_options(warm.string(), "f");
    o.remote.url = server.url();
    auto fn = cache_compile(m, &Hooked::f, o);
    EXPECT_TRUE(close(fn(hooked_input()).to_vector(), eager_f()));
    EXPECT_EQ(fn.status().outcome, Outcome::compiled);
  }
  const auto w = stats_of(warm);
  EXPECT_EQ(count(w, "misses"), 1u) << w.dump();
  EXPECT_EQ(count(w, "saves"), 1u) << w.dump();
  ASSERT_TRUE(w.contains("remote")) << w.dump();
  EXPECT_GT(count(w["remote"], "writes"), 0u) << w.dump();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("context " + std::to_string(round));
    const fs::path empty = base / ("empty" + std::to_string(round));
    {
      ProcessContext own;
      Hooked m;
      CacheOptions o = hooked_options(empty.string(), "f");
      o.remote.url = server.url();
      auto fn = cache_compile(m, &Hooked::f, o);
      EXPECT_TRUE(close(fn(hooked_input()).to_vector(), eager_f()));
      EXPECT_EQ(fn.status().outcome, Outcome::hit) << fn.status().reason;
      EXPECT_EQ(fn.compiles(), 0u);
      // Another method of the same context, compiled: two saves in all.
      auto g = cache_compile(m, &Hooked::g, hooked_options(empty.string(), "g"));
      EXPECT_TRUE(close(g(hooked_input()).to_vector(), eager_g()));
    }
    const auto s = stats_of(empty);
    EXPECT_EQ(count(s, "saves"), 2u) << s.dump();  // the background commit's, and g's
    ASSERT_TRUE(s.contains("remote")) << s.dump();
    EXPECT_EQ(count(s["remote"], "hits"), 1u) << s.dump();
    // Committed: a new process without the remote hits locally.
    server.stop();
    Out local = worker("run " + empty.string() + " f");
    server.resume();
    EXPECT_TRUE(has(local.text, "status hit cached 1 compiles 0")) << local.text;
  }
  // The warm directory again, in a second context of this process: a hit,
  // counted on top of what the first context wrote.
  {
    ProcessContext own;
    Hooked m;
    auto fn = cache_compile(m, &Hooked::f, hooked_options(warm.string(), "f"));
    (void)fn(hooked_input());
    EXPECT_EQ(fn.status().outcome, Outcome::hit) << fn.status().reason;
  }
  const auto w2 = stats_of(warm);
  EXPECT_EQ(count(w2, "hits"), 1u) << w2.dump();
  EXPECT_EQ(count(w2, "misses"), 1u) << w2.dump();
  EXPECT_EQ(count(w2, "saves"), 1u) << w2.dump();
}

// Warnings said once per process are said once per context: a refused
// directory is warned about in each of two contexts in sequence.
TEST_F(ProcessContextTest, WarningsOnceAreOncePerContext) {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::others_write, fs::perm_options::replace);
  for (int round = 0; round < 2; ++round) {
    ProcessContext own;
    testing::internal::CaptureStderr();
    Hooked m;
    auto f = cache_compile(m, &Hooked::f, hooked_options(dir.string(), "f"));
    auto g = cache_compile(m, &Hooked::g, hooked_options(dir.string(), "g"));
    (void)f(hooked_input());
    (void)g(hooked_input());
    const std::string log = testing::internal::GetCapturedStderr();
    std::size_t warnings = 0;
    for (auto at = log.find("refusing"); at != std::string::npos; at = log.find("refusing", at + 1)) ++warnings;
    EXPECT_EQ(warnings, 1u) << "context " << round << "\n" << log;
  }
}

// A compiled method made under a ProcessContext and (wrongly) used after
// it ended keeps working: the services it needs are made again in the
// context that is current then (the program's), and what it does there is
// flushed with that context.
TEST_F(ProcessContextTest, MethodUsedAfterItsContextEndedKeepsWorking) {
  testing_support::RedisServer server;
  Hooked m;
  CompiledMethod<Hooked, Tensor, const Tensor&> called, uncalled;
  {
    ProcessContext own;
    CacheOptions o = hooked_options(dir.string(), "f");
    o.remote.url = server.url();
    called = cache_compile(m, &Hooked::f, o);
    EXPECT_TRUE(close(called(hooked_input()).to_vector(), eager_f()));
    CacheOptions og = hooked_options(dir.string(), "g");
    og.remote.url = server.url();
    uncalled = cache_compile(m, &Hooked::g, og);
  }
  // After the context: later calls, and a first call.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(called(hooked_input()).to_vector(), eager_f()));
  EXPECT_TRUE(close(uncalled(hooked_input()).to_vector(), eager_g()));
  EXPECT_TRUE(uncalled.status().cached) << uncalled.status().reason;
  // And in a new context.
  {
    ProcessContext own;
    EXPECT_TRUE(close(called(hooked_input()).to_vector(), eager_f()));
    EXPECT_TRUE(close(uncalled(hooked_input()).to_vector(), eager_g()));
  }
  flush_process_context();
  const auto s = stats_of(dir);
  EXPECT_EQ(count(s, "saves"), 2u) << s.dump();
  Out local = worker("run " + dir.string() + " g --g");
  EXPECT_TRUE(has(local.text, "status hit cached 1 compiles 0")) << local.text;
}

// exit() from one thread while another is in a first call (compiling,
// then saving): the process exits with exit()'s status, no crash, no hang,
// whatever the first call was doing (under ASan: nothing used after it was
// freed).
TEST_F(ProcessContextTest, ExitWhileAnotherThreadIsInAFirstCall) {
  for (int delay : {0, 1, 3, 8, 15, 30, 60, 120}) {
    fs::remove_all(dir);
    Out o =
        sh("timeout 120 " + std::string(PROCESS_WORKER) + " exit-race " + dir.string() + " " + std::to_string(delay));
    EXPECT_EQ(o.status, 0) << "delay " << delay << " ms\n" << o.text;
    EXPECT_TRUE(has(o.text, "exiting")) << o.text;
    EXPECT_FALSE(has(o.text, "Sanitizer")) << o.text;
  }
}

// A commit queued on the program's context (an entry the remote tier
// served) while the program then makes and ends a ProcessContext of its
// own: the commit is not run in, or cut short by, the other context.
TEST_F(ProcessContextTest, BackgroundCommitOfTheProgramsContextOutlivesAnOwnContext) {
  testing_support::RedisServer server;
  const fs::path warm = base / "warm";
  ASSERT_TRUE(has(worker("run " + warm.string() + " f --remote " + server.url()).text, "cached 1"));
  int round = 0;
  for (int ms : {0, 1, 2, 4, 8, 16, 32}) {
    const fs::path d = base / ("d" + std::to_string(round++));
    Out o = worker("outer-commit " + d.string() + " " + server.url() + " " + std::to_string(ms));
    EXPECT_EQ(o.status, 0) << o.text;
    EXPECT_TRUE(has(o.text, "first hit")) << o.text;
    EXPECT_TRUE(has(o.text, "done")) << o.text;
    EXPECT_FALSE(has(o.text, "Sanitizer")) << o.text;
    server.stop();
    Out local = worker("run " + d.string() + " f");
    server.resume();
    EXPECT_TRUE(has(local.text, "status hit cached 1 compiles 0")) << local.text;
  }
}

// Two ProcessContexts ended in the order they were made (the outer one
// first, as two objects of a program that own one each may): the one
// still alive stays current, and when it ends the program's context is
// current again -- never a context that has ended.
TEST_F(ProcessContextTest, ContextsEndedOutOfOrderLeaveNoEndedContextCurrent) {
  Hooked m;
  auto call = [&](const std::string& method) {
    auto fn = cache_compile(m, &Hooked::f, hooked_options(dir.string(), method));
    EXPECT_TRUE(close(fn(hooked_input()).to_vector(), eager_f()));
    EXPECT_TRUE(fn.status().cached) << fn.status().reason;
  };
  process::Context* const program = &process::Context::current();
  auto first = std::make_unique<ProcessContext>();
  process::Context* const first_context = &process::Context::current();
  auto second = std::make_unique<ProcessContext>();
  process::Context* const second_context = &process::Context::current();
  first.reset();
  EXPECT_EQ(&process::Context::current(), second_context);
  call("a");
  second.reset();
  EXPECT_EQ(&process::Context::current(), program);
  EXPECT_NE(&process::Context::current(), first_context);
  call("b");
  flush_process_context();
  const auto s = stats_of(dir);
  EXPECT_EQ(count(s, "saves"), 2u) << s.dump();
}

// A background commit works in the context whose queue it is on: a
// context the program makes (and ends) while the commit runs is not the
// commit's, so ending it cannot destroy what the commit uses.
TEST_F(ProcessContextTest, BackgroundCommitWorksInTheContextThatQueuedIt) {
  process::Context::Scope outer;
  std::mutex mu;
  std::condition_variable cv;
  bool inner_made = false, seen_set = false;
  process::Context* seen = nullptr;
  storage::commit_later([&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return inner_made; });
    seen = &process::Context::current();
    seen_set = true;
    cv.notify_all();
  });
  {
    process::Context::Scope inner;
    std::unique_lock lock(mu);
    inner_made = true;
    cv.notify_all();
    cv.wait(lock, [&] { return seen_set; });
    EXPECT_NE(seen, &inner.context());
  }
  EXPECT_EQ(seen, &outer.context());
}

// Many threads make the first calls of different cached methods at once,
// in a new context (its services made concurrently): each runs the right
// program and is saved; a second round hits (run under TSan too).
TEST_F(ProcessContextTest, ManyFirstCallsAtOnceMakeTheServicesOnce) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 2; ++round) {
    ProcessContext own;
    std::vector<std::unique_ptr<Hooked>> models;
    for (int i = 0; i < kThreads; ++i) models.push_back(std::make_unique<Hooked>(1.0 + i));
    std::barrier start(kThreads);
    std::vector<std::vector<float>> got(kThreads);
    std::vector<CallStatus> status(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        Hooked& m = *models[static_cast<std::size_t>(i)];
        auto fn = i % 2 ? cache_compile(m, &Hooked::f, hooked_options(dir.string(), "f" + std::to_string(i)))
                        : cache_compile(m, &Hooked::g, hooked_options(dir.string(), "g" + std::to_string(i)));
        start.arrive_and_wait();
        got[static_cast<std::size_t>(i)] = fn(hooked_input()).to_vector();
        status[static_cast<std::size_t>(i)] = fn.status();
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < kThreads; ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + " thread " + std::to_string(i));
      EXPECT_TRUE(close(got[static_cast<std::size_t>(i)], i % 2 ? eager_f(1.0 + i) : eager_g(1.0 + i)));
      EXPECT_TRUE(status[static_cast<std::size_t>(i)].cached) << status[static_cast<std::size_t>(i)].reason;
      EXPECT_EQ(status[static_cast<std::size_t>(i)].outcome, round == 0 ? Outcome::compiled : Outcome::hit)
          << status[static_cast<std::size_t>(i)].reason;
    }
  }
  const auto s = stats_of(dir);
  EXPECT_EQ(count(s, "saves"), static_cast<uint64_t>(kThreads)) << s.dump();
  EXPECT_EQ(count(s, "hits"), static_cast<uint64_t>(kThreads)) << s.dump();
}

// Another writer stores a different valid object for the key between this
// process's trace and its save (here: a process with ge_cache, whose
// object holds the program): the store keeps the first writer's bytes, this
// process runs them, and its entry records their checksum.
TEST_F(ProcessContextTest, AdoptedObjectIsRunAndItsChecksumRecorded) {
  std::vector<float> got;
  std::vector<compiler::PassTiming> ran_timings;
  std::string ran_program;
  {
    ProcessContext own;
    Hooked m;
    bool planted = false;
    compile_hook() = [&] {
      if (std::exchange(planted, true)) return;
      Out o = sh(std::string(PROCESS_WORKER) + " run " + dir.string() + " f --ge-cache");
      ASSERT_TRUE(has(o.text, "status compiled cached 1")) << o.text;
    };
    auto fn = cache_compile(m, &Hooked::f, hooked_options(dir.string(), "f"));
    got = fn(hooked_input()).to_vector();
    compile_hook() = nullptr;
    ASSERT_TRUE(planted);
    EXPECT_TRUE(fn.status().cached) << fn.status().reason;
    const compiler::CompiledGraph& ran = detail::entry(fn.engine(), 0);
    ran_timings = ran.timings;
    ran_program = compiler::serialize_program(ran.program);
  }
  EXPECT_TRUE(close(got, eager_f()));
  const auto entries = testing_support::entries(dir.string());
  ASSERT_EQ(entries.size(), 1u);
  const storage::EntryRecord& e = entries.front();
  const storage::ObjectRecord kept = storage::Store::open(dir, storage::Create::no).object(e.graph_key, false);
  EXPECT_EQ(e.object_checksum, kept.meta.checksum);
  EXPECT_TRUE(kept.meta.with_program);
  EXPECT_TRUE(e.with_program);
  bool with_program = false;
  const compiler::CompiledGraph stored = compiler::deserialize_compiled(kept.raw, &with_program);
  ASSERT_TRUE(with_program);
  // The program run is the kept one (its compile's timings, not this
  // process's own compile's).
  ASSERT_EQ(ran_timings.size(), stored.timings.size());
  for (std::size_t i = 0; i < ran_timings.size(); ++i) {
    EXPECT_EQ(ran_timings[i].name, stored.timings[i].name);
    EXPECT_EQ(ran_timings[i].seconds, stored.timings[i].seconds) << ran_timings[i].name;
  }
  EXPECT_EQ(ran_program, compiler::serialize_program(stored.program));
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
}

// MPI initialised by the program itself (MPI_Init, no MpiSession): the
// process context's identity still comes from MPI, so each rank's entry
// names its own world rank.
TEST_F(ProcessContextTest, IdentityComesFromMpiThatTheProgramInitialised) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "Open MPI is not instrumented for TSan";
#endif
  Out o =
      sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
         "ASAN_OPTIONS=detect_leaks=0 timeout 120 " MPIEXEC " -n 2 " PROCESS_WORKER " mpi-identity " +
         dir.string());
  ASSERT_EQ(o.status, 0) << o.text;
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(has(o.text, "rank " + std::to_string(rank) + " entry ") &&
                has(o.text, "/world2global_rank" + std::to_string(rank) + "/f\n"))
        << o.text;
}
