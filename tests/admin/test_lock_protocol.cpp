// The lock protocol (docs/FORMAT.md, "Lock protocol") against the commands
// that run beside jobs: a command that removes waits for writers and, when
// they do not pause within --wait, says so and changes nothing; a repair
// checks each finding again under the lock; a commit pins the stored object
// it reuses; verify and export of a busy, healthy cache succeed; verify
// --repair, gc and clear beside a writer never leave an entry naming a
// missing object. Real processes (cache_worker, the npucache command) on a
// real directory.
#include <npucache/error.h>

#include "format/names.h"
#include "format/records.h"
#include "storage/claims.h"
#include "storage/store.h"
#include "support/cache_files.h"
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <vector>

using namespace npucache;
using testing_support::has;
using testing_support::Out;
using testing_support::sh;
using testing_support::slurp;
namespace fs = std::filesystem;

namespace {

const std::string kCli = NPUCACHE_CLI;

std::string worker(const fs::path& dir, const std::string& args = "prompt") {
  return std::string(CACHE_WORKER) + " run " + dir.string() + " seed " + args;
}

// Every file but the lock files, with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.is_regular_file() && f.path().parent_path().filename() != storage::names::kLocksDir)
      out[fs::relative(f.path(), dir).string()] = slurp(f.path());
  return out;
}

// A background writer: `cache_worker write` committing `n` entries, one
// transaction each, with its output in `log`. Started by the shell; wait()
// returns its exit status.
struct Writer {
  fs::path done, log;
  Writer(const fs::path& dir, const fs::path& base, const std::string& prefix, int n, int bytes)
      : done(base / (prefix + ".status")), log(base / (prefix + ".log")) {
    const Out o = sh("(" + std::string(CACHE_WORKER) + " write " + dir.string() + " " + prefix + " " +
                     std::to_string(n) + " " + std::to_string(bytes) + " > " + log.string() + " 2>&1; echo $? > " +
                     done.string() + ") > /dev/null 2>&1 < /dev/null &");
    EXPECT_EQ(o.status, 0) << o.text;
    // Started once its first commit is in (it has read what it copies).
    for (int i = 0; i < 600 && running() && !has(slurp(log), "committed 0"); ++i) ::usleep(10000);
  }
  bool running() const { return !fs::exists(done) || slurp(done).empty(); }
  int wait() const {
    for (int i = 0; i < 1200 && running(); ++i) ::usleep(50000);
    return running() ? -1 : std::stoi(slurp(done));
  }
  // The entries it reported committed.
  std::set<std::string> committed(const std::string& prefix) const {
    std::set<std::string> out;
    const std::string text = slurp(log);
    const std::regex line("committed ([0-9]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it)
      out.insert("Worker_dynamic_0/" + prefix + (*it)[1].str());
    return out;
  }
};

class LockProtocol : public testing_support::TempDirTest {
 protected:
  LockProtocol() : TempDirTest("locks") {}
};

}  // namespace

// While a writer is between its object and its index (it holds the store
// lock shared), the commands that remove wait for it, then say the cache
// is in use and change nothing; the read-only ones go on.
TEST_F(LockProtocol, CommandsThatRemoveWaitForWritersThenChangeNothing) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(sh(worker(dir, "prompt --static")).status, 0);
  // Something for each command to remove: a damaged object and an orphan.
  const auto keys = storage::Store::open(dir, storage::Create::no).object_keys();
  ASSERT_EQ(keys.size(), 2u);
  const fs::path victim = dir / storage::names::kObjectsDir / storage::names::object_file(keys[0]);
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  const auto before = snapshot(dir);
  {
    const storage::Writing writer = s.writing();
    for (const std::string cmd : {"verify --repair", "gc --orphans", "gc --max-size 0", "clear"}) {
      const Out o = sh(kCli + " " + cmd + " " + dir.string() + " --wait 0.5");
      EXPECT_EQ(o.status, 1) << cmd << ": " << o.text;
      EXPECT_TRUE(has(o.text, "is in use: another process holds " + (dir / "locks/sweep.lock").string())) << o.text;
      EXPECT_TRUE(has(o.text, "not free within 0.5 s; nothing was changed")) << o.text;
      EXPECT_EQ(snapshot(dir), before) << cmd << " changed the cache while a writer held the lock";
    }
    const Out v = sh(kCli + " verify " + dir.string() + " --wait 0.5");
    EXPECT_EQ(v.status, 1) << v.text;  // the planted damage, found beside the writer
    EXPECT_TRUE(has(v.text, victim.string())) << v.text;
    EXPECT_FALSE(has(v.text, "in use")) << v.text;
  }
  // Once the writer is done, the same commands run.
  const Out r = sh(kCli + " verify --repair " + dir.string() + " --wait 0.5");
  EXPECT_EQ(r.status, 0) << r.text;
  EXPECT_TRUE(has(r.text, "removed damaged object")) << r.text;
  EXPECT_EQ(sh(kCli + " clear " + dir.string() + " --wait 0.5").status, 0);
}

// `npucache clear` beside a running job that holds a compile claim (a
// region or a new shape it is compiling): the claim's lock file stays, so
// the claim stays held once (a newcomer asking gets nothing; without the
// file a newcomer would make a new one and compile the same thing); a lock
// nobody holds is removed. Released, the claim removes its file and is
// free again.
TEST_F(LockProtocol, ClearLeavesTheLocksRunningJobsHold) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const std::string key(32, 'a'), free_key(32, 'b');
  const fs::path locks = dir / storage::names::kLocksDir;
  (void)storage::Claim::try_take(dir.string(), free_key);                // taken and released: its file is gone
  std::ofstream(locks / storage::Claim::file_name(free_key)).put('\0');  // a stale one, nobody's
  // A link planted under a lock's name cannot be locked (never followed):
  // removed by its name, its target untouched.
  const fs::path target = dir.parent_path() / "not-a-lock";
  std::ofstream(target) << "kept";
  fs::create_symlink(target, locks / "planted.lock");
  std::optional<storage::Claim> held = storage::Claim::try_take(dir.string(), key);
  ASSERT_TRUE(held.has_value());
  const Out c = sh(kCli + " clear " + dir.string() + " --wait 0.5");
  EXPECT_EQ(c.status, 0) << c.text;
  const fs::path file = locks / storage::Claim::file_name(key);
  EXPECT_TRUE(has(c.text, "left " + file.string() + ": a running process holds it")) << c.text;
  EXPECT_TRUE(fs::exists(file)) << "clear removed a held claim's file";
  EXPECT_FALSE(fs::exists(locks / storage::Claim::file_name(free_key))) << "a lock nobody holds stays";
  EXPECT_FALSE(fs::is_symlink(locks / "planted.lock"));
  EXPECT_EQ(slurp(target), "kept");
  EXPECT_FALSE(storage::Claim::try_take(dir.string(), key).has_value()) << "two hold one claim after a clear";
  held.reset();
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(storage::Claim::try_take(dir.string(), key).has_value());
}

// A temporary a running writer holds (its owner lock: the stats flush,
// the tuning table, a commit's object) is left by clear, which names it;
// one nobody holds (a crashed writer's) goes, as does a link under such a
// name (no writer's); once released, the next clear removes it.
TEST_F(LockProtocol, ClearLeavesTheTemporariesRunningWritersHold) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const fs::path objects = dir / storage::names::kObjectsDir;
  const std::vector<fs::path> held_files = {dir / storage::names::temp_name(storage::names::kTuningFile),
                                            objects / storage::names::temp_name(std::string(32, 'c') + ".h5")};
  const fs::path crashed = dir / storage::names::temp_name(storage::names::kStatsFile);
  std::vector<int> fds;
  for (const auto& p : held_files) {
    std::ofstream(p) << "being written";
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << p;
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << p;
    fds.push_back(fd);
  }
  std::ofstream(crashed) << "left by a crash";
  // A link under a temporary's name is no writer's: removed, its target kept.
  const fs::path target = dir.parent_path() / "not-a-temp";
  std::ofstream(target) << "kept";
  const fs::path link = objects / storage::names::temp_name(std::string(32, 'd') + ".h5");
  fs::create_symlink(target, link);
  const Out c = sh(kCli + " clear " + dir.string() + " --wait 0.5");
  EXPECT_EQ(c.status, 0) << c.text;
  for (const auto& p : held_files) {
    EXPECT_TRUE(fs::exists(p)) << "clear removed a temporary its writer holds: " << p;
    EXPECT_TRUE(has(c.text, "left " + p.string() + ": a running process holds it")) << c.text;
  }
  EXPECT_FALSE(fs::exists(crashed)) << "a temporary nobody holds stays";
  EXPECT_FALSE(fs::is_symlink(link)) << "a link under a temporary's name stays";
  EXPECT_EQ(slurp(target), "kept");
  EXPECT_TRUE(testing_support::entry_paths(dir.string()).empty()) << "clear left entries";
  for (const int fd : fds) ::close(fd);
  const Out again = sh(kCli + " clear " + dir.string() + " --wait 0.5");
  EXPECT_EQ(again.status, 0) << again.text;
  for (const auto& p : held_files) EXPECT_FALSE(fs::exists(p)) << "a released temporary stays: " << p;
}

// A claim whose file someone removed while it was held (a clear of an
// earlier version, or by hand), then claimed anew by a newcomer: its
// release removes only its own file, so the newcomer's claim stays held
// once.
TEST_F(LockProtocol, AReleasedClaimRemovesOnlyItsOwnFile) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const std::string key(32, 'c');
  const fs::path file = dir / storage::names::kLocksDir / storage::Claim::file_name(key);
  std::optional<storage::Claim> first = storage::Claim::try_take(dir.string(), key);
  ASSERT_TRUE(first.has_value());
  fs::remove(file);
  std::optional<storage::Claim> newcomer = storage::Claim::try_take(dir.string(), key);
  ASSERT_TRUE(newcomer.has_value()) << "the name was free";
  first.reset();
  EXPECT_TRUE(fs::exists(file)) << "the first claim's release removed the newcomer's file";
  EXPECT_FALSE(storage::Claim::try_take(dir.string(), key).has_value()) << "two hold one claim";
  newcomer.reset();
  EXPECT_TRUE(storage::Claim::try_take(dir.string(), key).has_value());
}

// A finding of the check is acted on only if it is still true under the
// exclusive lock: an entry whose object was missing when verify looked, and
// which a writer stored again before the repair got its lock, is kept.
TEST_F(LockProtocol, RepairChecksEveryFindingAgainUnderTheLock) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const auto entries = testing_support::entries(dir);
  ASSERT_EQ(entries.size(), 1u);
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  const storage::ObjectRecord object = s.object(entries[0].graph_key, true);
  s.remove_object(entries[0].graph_key, s.sweeping(5));
  const fs::path out = base / "repair.out";
  {
    const storage::Writing writer = s.writing();
    // The check runs beside the writer and finds the object missing; the
    // repair then waits for the lock.
    ASSERT_EQ(sh("(" + kCli + " verify --repair " + dir.string() + " --wait 30 > " + out.string() +
                 " 2>&1; echo $? >> " + out.string() + ".status) > /dev/null 2>&1 < /dev/null &")
                  .status,
              0);
    ::sleep(2);
    EXPECT_FALSE(fs::exists(out.string() + ".status")) << "the repair did not wait for the writer: " << slurp(out);
    // The writer stores the object again (a rebuild) and releases the lock.
    (void)s.put_object(object, writer);
  }
  for (int i = 0; i < 600 && !fs::exists(out.string() + ".status"); ++i) ::usleep(50000);
  ASSERT_TRUE(fs::exists(out.string() + ".status")) << slurp(out);
  const std::string text = slurp(out);
  EXPECT_TRUE(has(text, "is missing")) << text;  // what the check saw
  EXPECT_FALSE(has(text, "broken entries removed")) << text;
  EXPECT_EQ(testing_support::entry_paths(dir).size(), 1u) << text;
  const Out v = sh(kCli + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  const Out warm = sh(worker(dir));
  EXPECT_TRUE(has(warm.text, "compiled 0\nstatus hit")) << warm.text;
}

// Another thread's sweep in the same process is waited for, as another
// process's is (a hold is per open file, the check for a thread waiting on
// its own hold is per thread): a save beside the size limit's gc in a
// commit thread waits, it does not fail.
TEST_F(LockProtocol, AnotherThreadsSweepIsWaitedFor) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  std::atomic<bool> held{false};
  std::thread sweeper([&] {
    const storage::Sweeping sweep = s.sweeping(5);
    held = true;
    ::usleep(300000);
  });
  while (!held) ::usleep(1000);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NO_THROW({ const storage::Writing w = s.writing(5); });
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.1);
  sweeper.join();
  // This thread's own exclusive hold: a write under it is a mistake said
  // at once, never a wait on itself.
  const storage::Sweeping mine = s.sweeping(5);
  EXPECT_THROW({ const storage::Writing w = s.writing(1); }, Error);
}

// An entry that reuses a stored object is committed with that object
// pinned: stored again from the writer's copy when a sweep removed it
// since it was read, left out (reported) when the writer holds no copy;
// never an index naming a missing object.
TEST_F(LockProtocol, ACommitPinsTheObjectItReuses) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  storage::EntryRecord e = testing_support::entries(dir).at(0);
  const storage::ObjectRecord o = s.object(e.graph_key, false);
  s.remove_object(e.graph_key, s.sweeping(5));  // a gc between the writer's read and its commit
  storage::EntryRecord again = e;
  again.path = e.path + "_again";
  const auto done = s.commit({{}, {again}, {o}});
  EXPECT_TRUE(done.unpinned.empty());
  EXPECT_TRUE(s.has_object(e.graph_key)) << "the reused object was not stored again";
  s.remove_object(e.graph_key, s.sweeping(5));
  storage::EntryRecord orphan = e;
  orphan.path = e.path + "_orphan";
  const auto left = s.commit({{}, {orphan}, {}});
  ASSERT_EQ(left.unpinned.size(), 1u);
  EXPECT_EQ(left.unpinned[0], orphan.path);
  const auto paths = testing_support::entry_paths(dir);
  EXPECT_EQ(std::count(paths.begin(), paths.end(), orphan.path), 0) << "an entry naming a missing object was committed";
}

// verify and export of a busy, healthy cache: a writer commits entry after
// entry meanwhile, and every verify is clean, every export succeeds.
TEST_F(LockProtocol, VerifyAndExportOfABusyHealthyCacheSucceed) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  Writer w(dir, base, "busy", 400, 0);
  int verifies = 0, exports = 0;
  while (w.running() && verifies < 60) {
    const Out v = sh(kCli + " verify " + dir.string());
    EXPECT_EQ(v.status, 0) << "a busy, healthy cache reported damaged:\n" << v.text;
    ++verifies;
    const Out x = sh(kCli + " export " + dir.string() + " -o " + (base / "busy.npuc").string());
    EXPECT_EQ(x.status, 0) << x.text;
    ++exports;
  }
  EXPECT_EQ(w.wait(), 0) << slurp(w.log);
  EXPECT_GE(verifies, 3) << "the writer ended before the commands could run beside it";
  EXPECT_EQ(sh(kCli + " verify " + dir.string()).status, 0);
}

// verify --repair, gc (every kind) and clear in a loop beside a writer: no
// entry the writer reported committed is lost to a repair or a gc, and
// once quiet no entry names a missing object (clear removes on purpose:
// what it removed is gone, nothing is left half).
TEST_F(LockProtocol, SweepsBesideAWriterLoseNothingAndLeaveNothingHalf) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  {
    Writer w(dir, base, "rep", 300, 0);
    int loops = 0;
    while (w.running() && loops < 40) {
      const Out r = sh(kCli + " verify --repair " + dir.string() + " && " + kCli + " gc --orphans " + dir.string() +
                       " && " + kCli + " gc --older-than 1w " + dir.string());
      EXPECT_EQ(r.status, 0) << r.text;
      EXPECT_FALSE(has(r.text, "broken entries removed")) << r.text;
      ++loops;
    }
    ASSERT_EQ(w.wait(), 0) << slurp(w.log);
    const auto paths = testing_support::entry_paths(dir);
    const std::set<std::string> present(paths.begin(), paths.end());
    for (const auto& p : w.committed("rep"))
      EXPECT_TRUE(present.count(p)) << p << " was reported committed and is gone";
    EXPECT_GE(loops, 2);
  }
  {
    Writer w(dir, base, "clr", 500, 0);
    int clears = 0;
    while (w.running() && clears < 20) {
      const Out c = sh(kCli + " clear " + dir.string());
      EXPECT_EQ(c.status, 0) << c.text;
      ++clears;
      ::usleep(20000);
    }
    EXPECT_EQ(w.wait(), 0) << slurp(w.log);
    const Out v = sh(kCli + " verify " + dir.string());
    EXPECT_EQ(v.status, 0) << "clear beside a writer left entries naming removed objects:\n" << v.text;
    EXPECT_GE(clears, 2);
  }
}

// A process that saved or served entries keeps a uses file while it lives
// (storage/live_uses.h) and removes it when it ends normally, whatever its
// context: none is left behind by jobs that come and go.
TEST_F(LockProtocol, AProcessThatEndsLeavesNoUsesFile) {
  ASSERT_EQ(sh(worker(dir)).status, 0);  // a save
  const Out hit = sh(worker(dir));       // a hit
  ASSERT_EQ(hit.status, 0) << hit.text;
  ASSERT_TRUE(has(hit.text, "status hit")) << hit.text;
  for (const auto& f : fs::directory_iterator(dir / storage::names::kLocksDir))
    EXPECT_NE(f.path().filename().string().rfind("uses.", 0), 0u) << f.path() << " was left by a process that ended";
}
