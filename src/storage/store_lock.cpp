// The store lock, locks/sweep.lock, taken through its gate,
// locks/sweep.gate (store.h; docs/FORMAT.md, "Lock protocol").
#include "storage/store.h"

#include "format/names.h"
#include "process/context.h"
#include "process/env.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

namespace npucache::storage {
namespace fs = std::filesystem;
namespace {

// The directories whose store lock this thread holds exclusively: a
// writing lock it asked for there would wait on itself (another thread of
// the process just waits, bounded, as another process does).
std::multiset<std::string>& exclusive_holds() {
  thread_local std::multiset<std::string> dirs;
  return dirs;
}

std::string lock_key(const fs::path& dir) { return fs::absolute(dir).lexically_normal().string(); }

std::string busy(const fs::path& dir, double waited) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", waited);
  return "the cache " + dir.string() + " is in use: another process holds " +
         (dir / names::kLocksDir / names::kSweepLock).string() +
         " (a job saving, or gc, verify --repair or clear) and it was not free within " + secs +
         " s; nothing was changed. Run the command again when the cache is quiet, or give it longer (--wait "
         "SECONDS)";
}

// The store lock within `wait_s`, through the gate: a writer passes it
// shared (released once it holds the lock); a sweep holds it exclusively
// while it waits, so writers that come meanwhile wait behind the sweep.
std::optional<FileLock> take(const Dir& dir, bool shared, double wait_s) {
  const Dir locks = dir.sub(names::kLocksDir, Create::yes);
  process::Env& env = process::Context::current().env();
  const double deadline = env.monotonic_s() + wait_s;
  const auto gate = locks.lock_within(names::kSweepGate, shared, wait_s);
  if (!gate) return std::nullopt;
  return locks.lock_within(names::kSweepLock, shared, std::max(0.0, deadline - env.monotonic_s()));
}

}  // namespace

StoreLock::StoreLock(FileLock lock, bool exclusive, std::string dir)
    : lock_(std::move(lock)), exclusive_(exclusive), dir_(std::move(dir)) {
  if (exclusive_) exclusive_holds().insert(dir_);
}

StoreLock::StoreLock(StoreLock&& o) noexcept
    : lock_(std::move(o.lock_)), exclusive_(o.exclusive_), dir_(std::exchange(o.dir_, std::string())) {}

StoreLock::~StoreLock() {
  if (!exclusive_ || dir_.empty()) return;
  auto& h = exclusive_holds();
  if (auto it = h.find(dir_); it != h.end()) h.erase(it);
}

Writing Store::writing(double wait_s) const {
  const std::string key = lock_key(dir_.path());
  if (exclusive_holds().count(key))
    throw Error("internal error: a write to " + dir_.path().string() +
                " under this thread's own exclusive store lock (pass the Sweeping it holds)");
  auto l = take(dir_, true, wait_s);
  if (!l) throw CacheBusy(busy(dir_.path(), wait_s));
  return Writing(std::move(*l), false, key);
}

std::optional<Sweeping> Store::try_sweeping(double wait_s) const {
  auto l = take(dir_, false, wait_s);
  if (!l) return std::nullopt;
  return Sweeping(std::move(*l), true, lock_key(dir_.path()));
}

Sweeping Store::sweeping(double wait_s) const {
  auto l = try_sweeping(wait_s);
  if (!l) throw CacheBusy(busy(dir_.path(), wait_s));
  return std::move(*l);
}

}  // namespace npucache::storage
