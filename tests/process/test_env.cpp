// The Env seam (process/env.h) and the directory over it (storage/dir.h):
// the real Env keeps POSIX's conventions; every operation of Dir goes
// through the Env of the current context, so a fault injected there
// (tests/support/fault_env.h) is what Dir reports, worded as the system
// words it; a failed replace or publish leaves the previous file and no
// temporary; short reads and writes are completed; the statistics' dates
// and the cache's timings read the Env's clocks; the Env is counted
// correctly from many threads at once.
#include "format/artifact.h"
#include "format/cache_error.h"
#include "process/context.h"
#include "process/env.h"
#include "storage/dir.h"
#include "storage/stats.h"
#include "support/error_message.h"
#include "support/fault_env.h"
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace npucache;
using npucache::CacheError;
using storage::Create;
using storage::Dir;
using storage::Safety;
using testing_support::Fault;
using testing_support::FaultEnv;
using testing_support::FileOp;
using testing_support::has;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::directory_iterator(dir))
    if (has(f.path().filename().string(), ".tmp.")) out.push_back(f.path().string());
  return out;
}

// `base` is the directory the tests use (created, 0700, empty).
class EnvTest : public testing_support::TempDirTest {
 protected:
  EnvTest() : TempDirTest("env") {}
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
};

}  // namespace

TEST_F(EnvTest, TheRealEnvKeepsPosixConventions) {
  process::Env& e = *process::default_env();
  const int d = e.openat(AT_FDCWD, base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(d, 0);
  errno = 0;
  EXPECT_EQ(e.openat(d, "missing", O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
  const int f = e.openat(d, "a", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(f, 0);
  EXPECT_EQ(e.write(f, "hello", 5), 5);
  EXPECT_EQ(e.pwrite(f, "J", 1, 0), 1);
  EXPECT_EQ(e.fsync(f), 0);
  EXPECT_EQ(e.flock(f, LOCK_EX), 0);
  EXPECT_EQ(e.flock(f, LOCK_UN), 0);
  struct stat st;
  EXPECT_EQ(e.fstat(f, &st), 0);
  EXPECT_EQ(st.st_size, 5);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(e.close(f), 0);
  const int r = e.openat(d, "a", O_RDONLY | O_CLOEXEC);
  char buf[8] = {};
  EXPECT_EQ(e.pread(r, buf, 3, 2), 3);
  EXPECT_EQ(std::string(buf, 3), "llo");
  EXPECT_EQ(e.read(r, buf, 8), 5);
  EXPECT_EQ(std::string(buf, 5), "Jello");
  EXPECT_EQ(e.read(r, buf, 8), 0);
  e.close(r);
  EXPECT_EQ(e.mkdirat(d, "sub", 0700), 0);
  EXPECT_EQ(e.mkdirat(d, "sub", 0700), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(e.linkat(d, "a", d, "b", 0), 0);
  EXPECT_EQ(e.linkat(d, "a", d, "b", 0), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(e.renameat(d, "b", d, "c"), 0);
  EXPECT_EQ(e.fstatat(d, "b", &st, AT_SYMLINK_NOFOLLOW), -1);
  EXPECT_EQ(errno, ENOENT);
  std::vector<std::string> names;
  EXPECT_EQ(e.list_dir(d, names), 0);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "c", "sub"}));
  names.clear();
  EXPECT_EQ(e.list_dir(d, names), 0);  // the descriptor was not moved: the same names again
  EXPECT_EQ(names.size(), 3u);
  EXPECT_EQ(e.unlinkat(d, "sub", AT_REMOVEDIR), 0);
  EXPECT_EQ(e.unlinkat(d, "c", 0), 0);
  std::string real;
  EXPECT_EQ(e.realpath((base / "." / "a").c_str(), real), 0);
  EXPECT_EQ(real, fs::canonical(base / "a").string());
  EXPECT_EQ(e.realpath((base / "nothing").c_str(), real), -1);
  EXPECT_EQ(errno, ENOENT);
  e.close(d);
  const double t0 = e.monotonic_s();
  e.sleep_s(0.01);
  EXPECT_GE(e.monotonic_s() - t0, 0.01);
  EXPECT_NEAR(e.wall_s(), static_cast<double>(::time(nullptr)), 2.0);
}

TEST_F(EnvTest, AFailedReplaceKeepsTheOldFileAndWordsTheSystemsReason) {
  const Dir d = Dir::open(base, Safety::cache, Create::no);
  d.write("index.h5", "old");
  process::Context::Scope scope(env);
  struct Case {
    Fault fault;
    const char* says;
  };
  for (const Case& c :
       {Case{Fault::fail(FileOp::create, 1, ENOSPC), "creating"},
        Case{Fault::fail(FileOp::write, 1, ENOSPC), "writing"}, Case{Fault::fail(FileOp::fsync, 1, EIO), "syncing"},
        Case{Fault::fail(FileOp::close, 1, EIO), "closing"},
        Case{Fault::fail(FileOp::rename, 1, EROFS), "renaming a temporary over"}}) {
    SCOPED_TRACE(std::string(testing_support::op_name(c.fault.op)));
    env->disarm();
    env->arm(c.fault);
    const std::string e = npucache::testing::error_message<CacheError>([&] { d.write("index.h5", "new"); });
    EXPECT_TRUE(has(e, c.says)) << e;
    EXPECT_TRUE(has(e, std::strerror(c.fault.error))) << e;
    EXPECT_EQ(slurp(base / "index.h5"), "old");
    EXPECT_TRUE(temporaries(base).empty());
  }
  // The directory's fsync fails after the rename: the new file is whole and
  // in place, and the caller hears of it.
  env->disarm();
  env->arm(Fault::fail(FileOp::fsync, 2, EIO));
  EXPECT_TRUE(
      has(npucache::testing::error_message<CacheError>([&] { d.write("index.h5", "new"); }), "syncing directory"));
  EXPECT_EQ(slurp(base / "index.h5"), "new");
  EXPECT_TRUE(temporaries(base).empty());
}

TEST_F(EnvTest, AFailedPublishLeavesNothing) {
  const Dir d = Dir::open(base, Safety::cache, Create::no);
  process::Context::Scope scope(env);
  for (const Fault& f : {Fault::fail(FileOp::write, 1, ENOSPC), Fault::fail(FileOp::fsync, 1, EIO),
                         Fault::fail(FileOp::link, 1, EIO), Fault::fail(FileOp::link, 1, ENOSPC)}) {
    env->disarm();
    env->arm(f);
    const std::string e = npucache::testing::error_message<CacheError>([&] { d.publish("object.h5", "bytes"); });
    EXPECT_TRUE(has(e, std::strerror(f.error))) << e;
    EXPECT_FALSE(fs::exists(base / "object.h5"));
    EXPECT_TRUE(temporaries(base).empty());
  }
  env->disarm();
  EXPECT_TRUE(d.publish("object.h5", "bytes"));
  EXPECT_FALSE(d.publish("object.h5", "other"));  // never replaced
  EXPECT_EQ(slurp(base / "object.h5"), "bytes");
  EXPECT_TRUE(temporaries(base).empty());
}

TEST_F(EnvTest, ShortReadsAndWritesAreCompletedAndReadErrorsReported) {
  const Dir d = Dir::open(base, Safety::cache, Create::no);
  const std::string bytes(10000, 'x');
  process::Context::Scope scope(env);
  env->arm(Fault::short_write(1));
  d.write("f", bytes);
  EXPECT_EQ(slurp(base / "f"), bytes);
  EXPECT_EQ(env->count(FileOp::write, "/.f.tmp."), 2u);  // the rest written by a second call
  env->arm(Fault::short_read(1));
  EXPECT_EQ(d.read("f", 1 << 20), bytes);
  env->disarm();
  env->arm(Fault::fail(FileOp::read, 1, EIO));
  const std::string e = npucache::testing::error_message<CacheError>([&] { (void)d.read("f", 1 << 20); });
  EXPECT_TRUE(has(e, "reading " + (base / "f").string() + " failed: Input/output error")) << e;
  // A file that ends before its size (truncated under the reader) is read
  // as far as it goes; what it holds is then checked by its decoder.
  env->disarm();
  env->arm(Fault::end_of_file(1));
  EXPECT_EQ(d.read("f", 1 << 20), "");
}

TEST_F(EnvTest, LocksListingsAndDirectoriesReportInjectedErrors) {
  const Dir d = Dir::open(base, Safety::cache, Create::no);
  process::Context::Scope scope(env);
  env->arm(Fault::fail(FileOp::lock, 1, ENOLCK));
  EXPECT_TRUE(has(npucache::testing::error_message<CacheError>([&] { (void)d.lock("x.lock"); }), "cannot lock"));
  env->arm(Fault::fail(FileOp::list, 1, EIO));
  EXPECT_TRUE(has(npucache::testing::error_message<CacheError>([&] { (void)d.list(); }),
                  "listing " + base.string() + " failed: Input/output error"));
  env->arm(Fault::fail(FileOp::mkdir, 1, ENOSPC));
  EXPECT_TRUE(has(npucache::testing::error_message<CacheError>([&] { (void)d.sub("objects", Create::yes); }),
                  "No space left on device"));
  EXPECT_FALSE(fs::exists(base / "objects"));
  env->arm(Fault::fail(FileOp::open, 1, EACCES, "/npucache-env-"));
  EXPECT_TRUE(
      has(npucache::testing::error_message<CacheError>([&] { (void)Dir::open(base, Safety::cache, Create::no); }),
          "opening directory " + base.string()));
  env->disarm();
  // Every operation of Dir was counted, by kind and by path.
  EXPECT_GE(env->count(FileOp::create, "/x.lock"), 1u);
  EXPECT_EQ(env->count(FileOp::mkdir, "/objects"), 1u);
  EXPECT_EQ(env->faulted().size(), 4u);
}

TEST_F(EnvTest, DatesAndTimingsReadTheEnvsClocks) {
  process::Context::Scope scope(env);
  env->set_manual_clock(1000.0, 1.7e9 + 0.25);
  storage::record_hit(base, "Model_x/prompt", 1.0);
  storage::flush_stats();
  EXPECT_DOUBLE_EQ(storage::read_stats(base).last_used.at("Model_x/prompt"), 1.7e9 + 0.25);
  // An entry's date (ModelCacheMeta's) is the Env's wall clock, local time
  // with its UTC offset, and reads back as that time.
  const std::time_t t = static_cast<std::time_t>(1.7e9);
  std::tm tm;
  localtime_r(&t, &tm);
  char want[32], zone[16];
  std::strftime(want, sizeof want, "%Y-%m-%d %H:%M:%S", &tm);
  std::strftime(zone, sizeof zone, "%z", &tm);
  EXPECT_EQ(storage::now_string(), std::string(want) + ".250000" + zone);
  EXPECT_DOUBLE_EQ(*storage::date_seconds(storage::now_string()), 1.7e9 + 0.25);
  // A slow call, on the manual clock: time passes, nobody waits.
  const Dir d = Dir::open(base, Safety::cache, Create::no);
  env->arm(Fault::slow(FileOp::fsync, 1, 30.0));
  const double before = process::default_env()->monotonic_s();
  d.write("f", "x");
  EXPECT_LT(process::default_env()->monotonic_s() - before, 5.0);
  EXPECT_DOUBLE_EQ(env->monotonic_s(), 1030.0);
  env->sleep_s(2);
  EXPECT_DOUBLE_EQ(env->wall_s(), 1.7e9 + 32.25);
}

// A stats.json that cannot be read (an I/O error, not damage) is kept as it
// is: the flush writes nothing rather than counters that start afresh.
TEST_F(EnvTest, AnUnreadableStatsFileIsNotReplaced) {
  storage::record_hit(base, "Model_x/prompt", 2.0);
  storage::flush_stats();
  const std::string before = slurp(base / "stats.json");
  ASSERT_TRUE(has(before, "Model_x/prompt")) << before;
  process::Context::Scope scope(env);
  env->arm(Fault::fail(FileOp::read, 1, EIO, "/stats.json"));
  storage::record_hit(base, "Model_y/prompt", 1.0);
  storage::flush_stats();
  EXPECT_EQ(env->faulted().size(), 1u);
  EXPECT_EQ(slurp(base / "stats.json"), before);
  storage::record_hit(base, "Model_y/prompt", 1.0);
  storage::flush_stats();  // readable again: merged
  EXPECT_TRUE(has(slurp(base / "stats.json"), "Model_x/prompt"));
  EXPECT_TRUE(has(slurp(base / "stats.json"), "Model_y/prompt"));
}

TEST_F(EnvTest, ManyThreadsShareOneEnv) {
  const Dir d = Dir::open(base, Safety::cache, Create::no);
  process::Context::Scope scope(env);
  constexpr int kThreads = 4, kFiles = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kFiles; ++i) {
        const std::string name = "t" + std::to_string(t) + "_" + std::to_string(i);
        d.write(name, name);
        EXPECT_EQ(d.read(name, 100), name);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(env->count(FileOp::rename), static_cast<std::size_t>(kThreads * kFiles));
  EXPECT_EQ(env->count(FileOp::read, "/t0_"), static_cast<std::size_t>(kFiles));
  EXPECT_EQ(d.list().size(), static_cast<std::size_t>(kThreads * kFiles));
}
