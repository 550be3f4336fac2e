// What an entry's dates mean to the commands beside a job. gc by age
// (storage/gc.h, entry_time): an entry's age counts from the later of its
// last recorded use and its save. An entry saved again since stats.json
// recorded an old use (a running job's save reaches stats.json only when
// it ends; a killed job's never) is not old, and neither is an entry an
// import wrote (its bundle's date is its first save elsewhere). An import
// never replaces an entry the cache saved after the bundle's
// (Store::Commit::keep_later), and replaces an earlier one. A date or a
// recorded use ahead of the clock is not trusted. Entries saved, served and
// imported on clocks set back 10 days or ahead (tests/support/fault_env.h)
// against ones of now, in one process.
#include <npucache/cache.h>
#include <npucache/models/models.h>

#include "admin/admin.h"
#include "process/context.h"
#include "storage/gc.h"
#include "storage/stats.h"
#include "support/cache_files.h"
#include "support/fault_env.h"
#include "support/seed_runs.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

constexpr double kTenDays = 10 * 86400.0;

class EntryAge : public testing_support::TempDirTest {
 protected:
  EntryAge() : TempDirTest("entryage") {}
  // The seed model's `method` run once into `d` (a save, or a hit).
  static void run(const fs::path& d, testing_support::SeedMethod method, const std::string& code_version = "") {
    testing_support::run_seed(d, method, code_version);
  }
  // The same, at a time `shift` seconds from now, by a process that
  // flushes its stats now (a long-running one).
  static void run_shifted(double shift, const fs::path& d,
                          Tensor (models::SeedExample::*method)(const models::InputMeta&, const std::vector<Tensor>&),
                          const std::string& code_version = "") {
    auto env = std::make_shared<testing_support::FaultEnv>();
    env->set_manual_clock(100.0, process::default_env()->wall_s() + shift);
    process::Context::Scope scope(env);  // flushes its stats when it ends
    run(d, method, code_version);
    env->set_manual_clock(200.0, process::default_env()->wall_s());
  }
  static void run_ten_days_ago(const fs::path& d, Tensor (models::SeedExample::*method)(const models::InputMeta&,
                                                                                        const std::vector<Tensor>&)) {
    run_shifted(-kTenDays, d, method);
  }
  static std::vector<std::string> paths(const fs::path& d) { return testing_support::entry_paths(d.string()); }
  static storage::GcResult older_than_a_week(const fs::path& d) {
    storage::flush_stats();
    storage::GcOptions o;
    o.older_than_s = 7 * 86400.0;
    return storage::gc(d.string(), o);
  }
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_F(EntryAge, AnEntryIsAsOldAsItsLastUseOrSaveWhicheverIsLater) {
  // Saved 10 days ago (and used then): old; exported as it is.
  run_ten_days_ago(dir, &models::SeedExample::decode);
  const fs::path bundle = dir.string() + ".npuc";
  (void)cache::admin::export_bundle(dir.string(), bundle.string());
  // Saved now: new.
  run(dir, &models::SeedExample::prompt);
  ASSERT_EQ(paths(dir).size(), 2u);
  (void)older_than_a_week(dir);
  ASSERT_EQ(paths(dir).size(), 1u) << "the entry saved 10 days ago is not evicted";
  EXPECT_TRUE(ends_with(paths(dir)[0], "/prompt")) << paths(dir)[0];

  // Its last recorded use 10 days ago, its save now by a job still
  // running (its save reaches stats.json when it ends): not old.
  const fs::path resaved = dir.string() + "-resaved";
  run_shifted(-kTenDays, resaved, &models::SeedExample::prompt, "v1");
  run(resaved, &models::SeedExample::prompt, "v2");  // stale: compiled and saved again, not flushed
  {
    storage::GcOptions o;
    o.older_than_s = 7 * 86400.0;
    (void)storage::gc(resaved.string(), o);  // stats.json as the running job left it
  }
  EXPECT_EQ(paths(resaved).size(), 1u) << "an entry saved now was evicted by its old recorded use";
  fs::remove_all(resaved);

  // Saved a year ahead (a clock ahead), then used now: neither the date
  // nor the record ahead keeps it; a gc 30 days later evicts it.
  const fs::path ahead = dir.string() + "-ahead";
  run_shifted(365 * 86400.0, ahead, &models::SeedExample::prompt);
  {
    process::Context::Scope ended;  // a hit now, by a process that has ended
    run(ahead, &models::SeedExample::prompt);
  }
  {
    auto env = std::make_shared<testing_support::FaultEnv>();
    env->set_manual_clock(100.0, process::default_env()->wall_s() + 30 * 86400.0);
    process::Context::Scope later(env);
    storage::GcOptions o;
    o.older_than_s = 7 * 86400.0;
    (void)storage::gc(ahead.string(), o);
  }
  EXPECT_TRUE(paths(ahead).empty()) << "a date ahead of the clock kept an entry unused for 30 days";
  fs::remove_all(ahead);

  // Imported now from a bundle dated 10 days ago: not old.
  const fs::path other = dir.string() + "-imported";
  const auto imported = cache::admin::import_bundle(bundle.string(), other.string());
  ASSERT_EQ(imported.entries, 1u);
  (void)older_than_a_week(other);
  EXPECT_EQ(paths(other).size(), 1u) << "an entry imported now was evicted by its bundle's date";
  // A process that used it 10 days ago and flushes now does not age it.
  run_ten_days_ago(other, &models::SeedExample::decode);
  (void)older_than_a_week(other);
  EXPECT_EQ(paths(other).size(), 1u) << "an earlier use recorded later aged the entry";
  fs::remove_all(other);
  fs::remove(bundle);
}

TEST_F(EntryAge, AnImportNeverReplacesAnEntrySavedAfterTheBundles) {
  const fs::path old_cache = dir / "old", new_cache = dir / "new", mixed = dir / "mixed";
  run_ten_days_ago(old_cache, &models::SeedExample::decode);
  run(new_cache, &models::SeedExample::decode);
  const fs::path old_bundle = dir / "old.npuc", new_bundle = dir / "new.npuc";
  (void)cache::admin::export_bundle(old_cache.string(), old_bundle.string());
  (void)cache::admin::export_bundle(new_cache.string(), new_bundle.string());
  const auto date = [](const fs::path& d) {
    const auto es = testing_support::entries(d.string());
    EXPECT_EQ(es.size(), 1u) << d;
    return es.empty() ? std::string() : es[0].meta.date;
  };
  const std::string old_date = date(old_cache), new_date = date(new_cache);
  ASSERT_LT(old_date, new_date);
  // The bundle's entry is older than the cache's: kept.
  const auto kept = cache::admin::import_bundle(old_bundle.string(), new_cache.string());
  EXPECT_EQ(kept.kept_later, 1u);
  EXPECT_EQ(kept.entries, 0u);
  EXPECT_EQ(date(new_cache), new_date) << "an import replaced an entry saved after the bundle's";
  // The bundle's entry is newer: it replaces the cache's.
  (void)cache::admin::import_bundle(old_bundle.string(), mixed.string());
  ASSERT_EQ(date(mixed), old_date);
  const auto replaced = cache::admin::import_bundle(new_bundle.string(), mixed.string());
  EXPECT_EQ(replaced.kept_later, 0u);
  EXPECT_EQ(replaced.entries, 1u);
  EXPECT_EQ(date(mixed), new_date);
}

// Dates are compared as times, each with its zone: an entry saved where
// local time is 14 hours ahead (its date reads later) is replaced by one
// saved after it in UTC.
TEST_F(EntryAge, AnImportComparesDatesAcrossTimeZones) {
  const fs::path east = dir / "east", utc = dir / "utc";
  const std::string tz = std::getenv("TZ") ? std::getenv("TZ") : "";
  const auto set_tz = [](const std::string& z) {
    if (z.empty())
      ::unsetenv("TZ");
    else
      ::setenv("TZ", z.c_str(), 1);
    ::tzset();
  };
  set_tz("Etc/GMT-14");
  run(east, &models::SeedExample::decode);
  set_tz("UTC");
  ::usleep(20000);
  run(utc, &models::SeedExample::decode);
  set_tz(tz);
  const std::string east_date = testing_support::entries(east.string()).at(0).meta.date;
  const std::string utc_date = testing_support::entries(utc.string()).at(0).meta.date;
  ASSERT_GT(east_date, utc_date) << "the east's date reads later";
  const fs::path bundle = dir / "utc.npuc";
  (void)cache::admin::export_bundle(utc.string(), bundle.string());
  const auto t = cache::admin::import_bundle(bundle.string(), east.string());
  EXPECT_EQ(t.kept_later, 0u) << "an entry saved earlier in another zone was kept";
  EXPECT_EQ(testing_support::entries(east.string()).at(0).meta.date, utc_date);
}

// A gc by age that runs while an import is writing waits for the import's
// use of its entries to be recorded: it never judges them by the bundle's
// dates (10 days old here). The import's stats flush is slowed (1.5 s) so
// the gc, started once the import's entry is in the index, runs inside it.
TEST_F(EntryAge, AGcBesideAnImportNeverJudgesItsEntriesByTheBundlesDates) {
  const fs::path old_cache = dir / "old", target = dir / "target", bundle = dir / "old.npuc";
  run_ten_days_ago(old_cache, &models::SeedExample::decode);
  (void)cache::admin::export_bundle(old_cache.string(), bundle.string());
  auto env = std::make_shared<testing_support::FaultEnv>();
  env->arm(testing_support::Fault::slow(testing_support::FileOp::rename, 1, 1.5, "stats.json"));
  process::Context importer(env);  // the import's process: current in its thread only
  std::thread import([&] {
    {
      process::Context::Bind bound(importer);
      (void)cache::admin::import_bundle(bundle.string(), target.string());
    }
    importer.shutdown();
  });
  const double deadline = process::default_env()->monotonic_s() + 20;
  const auto written = [&] {
    try {
      return !paths(target).empty();
    } catch (const std::exception&) {
      return false;  // the import is making the directory
    }
  };
  while (!written() && process::default_env()->monotonic_s() < deadline) ::usleep(1000);
  ASSERT_FALSE(paths(target).empty()) << "the import wrote no entry";
  storage::GcOptions o;
  o.older_than_s = 7 * 86400.0;
  (void)storage::gc(target.string(), o);
  import.join();
  EXPECT_EQ(paths(target).size(), 1u) << "a gc beside the import evicted what it wrote by the bundle's date";
}

// A process's hits reach stats.json when it ends, so a gc by age beside a
// running job saw what it had loaded as unused since its last recorded use.
// A running process's uses file (storage/live_uses.h) keeps those entries;
// a file its process left (killed: its lock is free) keeps nothing and is
// removed; a process that ends removes its own.
TEST_F(EntryAge, AGcKeepsWhatARunningProcessServesAndNotWhatAGoneOneDid) {
  run_ten_days_ago(dir, &models::SeedExample::decode);
  ASSERT_EQ(paths(dir).size(), 1u);
  const std::string entry = paths(dir)[0];
  const auto uses_files = [](const fs::path& d) {
    std::vector<std::string> out;
    if (!fs::exists(d / "locks")) return out;
    for (const auto& f : fs::directory_iterator(d / "locks"))
      if (f.path().filename().string().rfind("uses.", 0) == 0) out.push_back(f.path().string());
    return out;
  };
  storage::GcOptions week;
  week.older_than_s = 7 * 86400.0;
  {
    process::Context::Scope running;  // a job that served the entry and has not ended
    run(dir, &models::SeedExample::decode);
    ASSERT_EQ(uses_files(dir).size(), 1u) << "the hit made no uses file";
    const storage::GcResult g = storage::gc(dir.string(), week);
    EXPECT_EQ(paths(dir).size(), 1u) << "a gc evicted the entry a running process served";
    EXPECT_EQ(g.in_use, std::vector<std::string>{entry});
    EXPECT_EQ(g.live_processes, 1u);
  }
  EXPECT_TRUE(uses_files(dir).empty()) << "a process that ended left its uses file";

  // Saved 10 days ago, named by the file of a process that is gone.
  const fs::path other = dir.string() + "-gone";
  run_ten_days_ago(other, &models::SeedExample::decode);
  const std::string gone = paths(other).at(0);
  {
    std::ofstream f(other / "locks" / "uses.host.12345.00ff00ff00ff00ff.lock");
    f << gone << "\n";
  }
  const storage::GcResult g = storage::gc(other.string(), week);
  EXPECT_TRUE(paths(other).empty()) << "a gone process's uses file kept an old entry";
  EXPECT_TRUE(g.in_use.empty());
  EXPECT_TRUE(uses_files(other).empty()) << "a gone process's uses file was not removed";
  fs::remove_all(other);
}

// A running job on a clock 2 hours behind saves an entry: its date reads 2
// hours old to a gc on a right clock. The job's uses file keeps it.
TEST_F(EntryAge, AGcKeepsWhatARunningJobOnAClockBehindSaved) {
  auto env = std::make_shared<testing_support::FaultEnv>();
  env->set_manual_clock(100.0, process::default_env()->wall_s() - 7200);
  std::unique_ptr<process::Context::Scope> job = std::make_unique<process::Context::Scope>(env);
  run(dir, &models::SeedExample::prompt);
  ASSERT_EQ(paths(dir).size(), 1u);
  storage::GcResult g;
  process::Context admin_process(process::default_env());  // the real clock
  std::thread admin([&] {                                  // another process, current in its thread only
    {
      process::Context::Bind bound(admin_process);
      storage::GcOptions o;
      o.older_than_s = 3600;
      g = storage::gc(dir.string(), o);
    }
    admin_process.shutdown();
  });
  admin.join();
  EXPECT_EQ(paths(dir).size(), 1u) << "a gc evicted what a running job on a clock behind had just saved";
  EXPECT_EQ(g.in_use.size(), 1u);
  job.reset();
}
