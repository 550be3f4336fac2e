// Administration commands beside a process that keeps using the cache, in
// one process: a `clear` between two calls of a running job leaves it a
// store it can name and save to (Store::identity makes store.json again);
// a `clear` waits for a statistics flush that has read the old file, so
// the flush never puts the cleared counters back; a sweep reads each index
// from its bytes, never from a decoding its unchanged stat vouches for.
#include <npucache/cache.h>
#include <npucache/models/models.h>

#include "admin/admin.h"
#include "format/names.h"
#include "process/context.h"
#include "storage/gc.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "support/cache_files.h"
#include "support/fault_env.h"
#include "support/process.h"
#include "support/seed_runs.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

class BesideJobs : public testing_support::TempDirTest {
 protected:
  BesideJobs() : TempDirTest("beside") {}
  static void run(const fs::path& d, testing_support::SeedMethod method) { testing_support::run_seed(d, method); }
};

}  // namespace

TEST_F(BesideJobs, AClearBetweenTwoCallsLeavesAStoreTheJobCanName) {
  run(dir, &models::SeedExample::prompt);
  const std::string before = storage::Store::open(dir, storage::Create::yes).identity();
  (void)cache::admin::clear(dir.string(), 5.0);
  ASSERT_FALSE(fs::exists(dir / storage::names::kStoreFile));
  // The job's next method: its store (already marked by this process).
  std::string after;
  EXPECT_NO_THROW(after = storage::Store::open(dir, storage::Create::yes).identity());
  EXPECT_FALSE(after.empty());
  EXPECT_NE(after, before) << "the cleared store kept its id";
  EXPECT_EQ(storage::Store::open(dir, storage::Create::yes).identity(), after) << "made again on every call";
  run(dir, &models::SeedExample::decode);
  EXPECT_EQ(testing_support::entry_paths(dir.string()).size(), 1u) << "the job saves nothing after the clear";
}

TEST_F(BesideJobs, AClearWaitsForAStatisticsFlushThatReadTheOldFile) {
  run(dir, &models::SeedExample::prompt);
  storage::flush_stats();
  ASSERT_TRUE(fs::exists(dir / storage::names::kStatsFile));
  // A process that ends while the clear runs: its flush has read stats.json
  // (under stats.lock) and renames the merged file 1 s later.
  auto env = std::make_shared<testing_support::FaultEnv>();
  env->arm(testing_support::Fault::slow(testing_support::FileOp::rename, 1, 1.0, "stats.json"));
  process::Context other(env);  // that process: its context, current in its thread only
  std::thread ending([&] {
    {
      process::Context::Bind bound(other);
      run(dir, &models::SeedExample::prompt);  // a hit
    }
    other.shutdown();  // the process ends: its counters flush
  });
  const fs::path lock = dir / storage::names::kLocksDir / storage::names::kStatsLock;
  const auto flushing = [&] {
    const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    ::close(fd);
    return held;
  };
  for (int i = 0; i < 20000 && !flushing(); ++i) ::usleep(500);
  ASSERT_TRUE(flushing()) << "the flush never took its lock";
  const auto cleared = cache::admin::clear(dir.string(), 5.0);
  ending.join();
  for (const auto& f : cleared.in_use)  // the ending process's uses file, the flush's temporary
    EXPECT_TRUE(f.find("/locks/uses.") != std::string::npos || f.find(".stats.json.tmp.") != std::string::npos)
        << f << " was left in use";
  EXPECT_FALSE(fs::exists(dir / storage::names::kStatsFile)) << "the flush put the counters from before the clear back";
}

// An index rewritten in place with the same size, inode and time (a file
// system of coarse times, a clock behind, an inode reused) looks unchanged
// by its stat. A reader may take its earlier decoding; a sweep, which
// removes what no entry it reads names, reads the bytes: here it finds the
// damage and collects nothing. The same for the newest delta of an index
// of 40 entries (deltas past 32: docs/FORMAT.md, "Base and deltas"), whose
// merge a reader keeps by the files' stats.
namespace {

// Flips a byte of `file`'s records in place and gives it back its times.
void damage_in_place(const fs::path& file) {
  struct stat before {};
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  ASSERT_GT(before.st_size, 200);
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char byte = 0;
  const off_t at = 200;  // in its records (the HDF5 view for h5dump follows them)
  ASSERT_EQ(::pread(fd, &byte, 1, at), 1);
  byte = static_cast<char>(byte ^ 0x5a);
  ASSERT_EQ(::pwrite(fd, &byte, 1, at), 1);
  ::close(fd);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
}

}  // namespace

TEST_F(BesideJobs, ASweepReadsEachIndexFromItsBytes) {
  const fs::path with_deltas = dir.string() + "-deltas";
  const testing_support::Out w =
      testing_support::sh(std::string(CACHE_WORKER) + " write " + with_deltas.string() + " w 40 64");
  ASSERT_EQ(w.status, 0) << w.text;
  auto env = std::make_shared<testing_support::FaultEnv>();
  env->set_manual_clock(100.0, process::default_env()->wall_s() + 10);  // every file settled
  process::Context::Scope scope(env);
  run(dir, &models::SeedExample::prompt);
  for (const fs::path& d : {dir, with_deltas}) {
    SCOPED_TRACE(d.string());
    const storage::Store s = storage::Store::open(d, storage::Create::no);
    const auto models = s.model_infos();
    ASSERT_EQ(models.size(), 1u);
    ASSERT_TRUE(s.index(models[0]).has_value());  // decoded and kept, by the stats
    fs::path changed = s.index_path(models[0]);
    if (d == with_deltas) {
      changed.clear();
      for (const auto& f : fs::directory_iterator(d / storage::names::kDeltasDir))
        if (changed.empty() || f.path().filename() > changed.filename()) changed = f.path();
      ASSERT_FALSE(changed.empty()) << "40 entries made no delta";
    }
    damage_in_place(changed);
    ASSERT_TRUE(s.index(models[0]).has_value()) << "a reader takes the kept decoding";
    storage::GcOptions o;
    o.max_size = std::size_t{1} << 40;
    const storage::GcResult g = storage::gc(d.string(), o);
    EXPECT_FALSE(g.problems.empty()) << "the sweep took the kept decoding of a changed " << changed;
    EXPECT_EQ(g.removed_objects, 0u);
  }
  fs::remove_all(with_deltas);
}
