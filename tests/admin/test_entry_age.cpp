// What an entry's dates mean to the commands beside a job. gc by age
// (storage/gc.h, entry_time): an entry's age counts from the later of its
// last recorded use and its save. An entry saved again since stats.json
// recorded an old use (a running job's save reaches stats.json only when
// it ends; a killed job's never) is not old, and neither is an entry an
// import wrote (its bundle's date is its first save elsewhere). An import
// never replaces an entry the cache saved after the bundle's
// (Store::Commit::keep_later), and replaces an earlier one. Entries saved,
// served and imported on a clock set back 10 days
// (tests/support/fault_env.h) against ones of now, in one process.
#include <npucache/cache.h>
#include <npucache/models/models.h>

#include "admin/admin.h"
#include "process/context.h"
#include "storage/gc.h"
#include "storage/stats.h"
#include "support/cache_files.h"
#include "support/fault_env.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

constexpr double kTenDays = 10 * 86400.0;

class EntryAge : public testing_support::TempDirTest {
 protected:
  EntryAge() : TempDirTest("entryage") {}
  // The seed model's `method` run once into `d` (a save, or a hit).
  static void run(const fs::path& d,
                  Tensor (models::SeedExample::*method)(const models::InputMeta&, const std::vector<Tensor>&)) {
    CacheOptions o;
    o.cache_dir = d.string();
    o.compile.config = CompilerConfig{};
    o.compile.config->autotune_candidates = 1;
    models::SeedExample m;
    auto fn = cache_compile(m, method, o);
    models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), false};
    std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
    fn(x, kv);
  }
  // The same, by a process whose clock is 10 days behind.
  static void run_ten_days_ago(const fs::path& d, Tensor (models::SeedExample::*method)(const models::InputMeta&,
                                                                                        const std::vector<Tensor>&)) {
    auto env = std::make_shared<testing_support::FaultEnv>();
    env->set_manual_clock(100.0, process::default_env()->wall_s() - kTenDays);
    process::Context::Scope scope(env);  // flushes its stats when it ends
    run(d, method);
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

  // Its last recorded use 10 days ago, its save now (a job saving it
  // again, not ended yet, or killed): not old.
  run_ten_days_ago(dir, &models::SeedExample::prompt);  // a hit, recorded 10 days ago
  ASSERT_EQ(paths(dir).size(), 1u);
  const storage::GcResult kept = older_than_a_week(dir);
  EXPECT_EQ(paths(dir).size(), 1u) << "an entry saved now was evicted by its old recorded use";

  // Imported now from a bundle dated 10 days ago: not old.
  const fs::path other = dir.string() + "-imported";
  const auto imported = cache::admin::import_bundle(bundle.string(), other.string());
  ASSERT_EQ(imported.entries, 1u);
  (void)older_than_a_week(other);
  EXPECT_EQ(paths(other).size(), 1u) << "an entry imported now was evicted by its bundle's date";
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
