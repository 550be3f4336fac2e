// clear (admin/admin.h): every file of a cache but the locks and
// temporaries running processes hold, under the store lock.
#include "admin/admin.h"

#include <npucache/error.h>

#include "format/cache_error.h"
#include "format/names.h"
#include "h5/h5.h"
#include "storage/store.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace npucache::cache::admin {
namespace {

// The format-1 cache.h5 is npucache's when its root carries npucache's
// attributes (producer "npucache", format_version "1").
bool is_our_format1(const Dir& d) {
  try {
    auto bytes = d.read(names::kFormat1File, std::size_t{64} << 30);
    if (!bytes || bytes->size() < 8 || std::memcmp(bytes->data(), "\x89HDF\r\n\x1a\n", 8) != 0) return false;
    auto guard = h5::lock();
    h5::Handle f = h5::open_image(*bytes);
    const bool ours = h5::read_fixed_string_attr(f.id(), "producer") == "npucache" &&
                      h5::read_fixed_string_attr(f.id(), "format_version") == "1";
    return ours;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

ClearResult clear(const std::string& dir, double wait_s, bool dry_run) {
  ClearResult out;
  if (!Dir::exists(dir)) return out;  // nothing there, nothing created
  const Dir d = Dir::open(dir, Safety::cache, Create::no);
  // Exclusive: no writer is between an object and its entry. The lock's
  // own files stay (a process waiting on one holds that inode).
  std::optional<Sweeping> held;
  bool cache_here = false;
  for (const char* n : {names::kLocksDir, names::kObjectsDir, names::kStoreFile, names::kCacheDirTag})
    cache_here = cache_here || d.stat(n).has_value();
  if (cache_here && !dry_run) held.emplace(Store::open(dir, Create::no).sweeping(wait_s));
  const auto drop = [&](const Dir& in, const std::string& n) {
    if (dry_run)
      out.files.push_back((in.path() / n).string());
    else
      in.remove(n);
  };
  // A temporary goes unless its writer holds it (then it is named in use):
  // whether it is left.
  const auto drop_temp = [&](const Dir& in, const std::string& n) {
    if (in.remove_unheld_temp(n)) {
      ++out.removed;
      return false;
    }
    if (!in.stat(n)) return false;
    out.in_use.push_back((in.path() / n).string());
    return true;
  };
  std::vector<std::string> names = d.list();
  for (const auto& n : names) {
    const bool temp = names::temp_owner_any(n) > 0;
    bool ours = temp;
    if (n == names::kStatsFile || n == names::kConfigFile || n == names::kCacheConfigFile || n == names::kStoreFile ||
        n == names::kCacheDirTag)
      ours = true;
    else if (!names::index_model_info(n).empty())
      ours = is_our_envelope(d, n, EnvelopeKind::index);
    else if (n == names::kTuningFile)
      ours = is_our_envelope(d, n, EnvelopeKind::tuning);
    else if (n == names::kProfileFile)
      ours = is_our_envelope(d, n, EnvelopeKind::profile);
    else if (n == names::kFormat1File)
      ours = is_our_format1(d);
    if (n == names::kObjectsDir || n == names::kLocksDir || n == names::kTemplatesDir || n == names::kDeltasDir ||
        n == names::kRegionsDir)
      continue;
    if (ours && temp && !dry_run) {  // a writer still writing it (stats, tuning, a commit) keeps it
      (void)drop_temp(d, n);
    } else if (ours) {
      out.had_cache = out.had_cache || !temp;
      // A table written under a lock of its own (not the store lock) goes
      // under that lock: a flush that read the file before would rename
      // its old contents back after the clear.
      const char* own_lock = n == names::kStatsFile     ? names::kStatsLock
                             : n == names::kTuningFile  ? names::kTuningLock
                             : n == names::kProfileFile ? names::kProfileLock
                                                        : nullptr;
      std::optional<FileLock> table;
      if (own_lock && !dry_run) {
        if (auto l = d.sub(names::kLocksDir, Create::yes).lock_within(own_lock, false, wait_s))
          table.emplace(std::move(*l));
        else {  // still being written after --wait: left, named in use
          out.in_use.push_back((d.path() / n).string());
          continue;
        }
      }
      drop(d, n);
      ++out.removed;
    } else {
      out.left.push_back((d.path() / n).string());
    }
  }
  // What names an object (templates, index deltas) before the objects: a
  // clear stopped midway (killed, an I/O error) never leaves a template or
  // an entry naming a missing object.
  for (const char* sub :
       {names::kTemplatesDir, names::kDeltasDir, names::kObjectsDir, names::kRegionsDir, names::kLocksDir}) {
    auto info = d.stat(sub);
    if (!info) continue;
    const Dir s = d.sub(sub, Create::no);
    bool empty = true;
    for (const auto& n : s.list()) {
      const std::string where = sub;
      if (where == names::kLocksDir && (n == names::kSweepLock || n == names::kSweepGate) && (held || dry_run)) {
        empty = false;  // kept: see above
        continue;
      }
      const bool ours =
          where == names::kLocksDir ? (n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0)
          : where == names::kDeltasDir
              ? (!names::delta_of(n).first.empty() && is_our_envelope(s, n, EnvelopeKind::index)) ||
                    names::temp_owner_any(n) > 0
          : where == names::kTemplatesDir
              ? (!names::template_key_of(n).empty() && is_our_envelope(s, n, EnvelopeKind::capture_template)) ||
                    names::temp_owner_any(n) > 0
          : where == names::kRegionsDir
              ? (!names::region_key_of(n).empty() && is_our_envelope(s, n, EnvelopeKind::compiled_region)) ||
                    names::temp_owner_any(n) > 0
              : (!names::object_key(n).empty() && is_our_envelope(s, n, EnvelopeKind::object)) ||
                    names::temp_owner_any(n) > 0;
      if (ours && where == names::kLocksDir && !dry_run) {
        // A lock a running process holds (a compile claim, the tuning
        // table's) stays: without its name a newcomer would make a new
        // file and hold the same lock at once. A free one is removed while
        // clear holds it (Dir::remove_lock).
        out.had_cache = true;
        std::optional<FileLock> lock;
        try {
          if (auto l = s.lock_within(n, false, 0.0)) lock.emplace(std::move(*l));
        } catch (const Error&) {  // not ours to lock (another user's, a link): removed by name, as before
          drop(s, n);
          ++out.removed;
          continue;
        }
        if (!lock) {
          out.in_use.push_back((s.path() / n).string());
          empty = false;
          continue;
        }
        if (s.remove_lock(n, *lock)) ++out.removed;
        continue;
      }
      if (ours && where != names::kLocksDir && names::temp_owner_any(n) > 0 && !dry_run) {
        out.had_cache = true;
        if (drop_temp(s, n)) empty = false;
      } else if (ours) {
        drop(s, n);
        ++out.removed;
        out.had_cache = true;
      } else {
        out.left.push_back((s.path() / n).string());
        empty = false;
      }
    }
    if (empty && !dry_run && !d.remove_empty_dir(sub)) out.left.push_back((d.path() / sub).string());
  }
  return out;
}

}  // namespace npucache::cache::admin
