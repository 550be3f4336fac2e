#include "storage/gc.h"

#include "storage/regions.h"
#include "storage/templates.h"

#include <npucache/error.h>

#include "format/artifact.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/object_file.h"
#include "format/profile_file.h"
#include "h5/h5.h"
#include "log/log.h"
#include "log/progress.h"
#include "process/context.h"
#include "process/env.h"
#include "process/once.h"
#include "process/settings.h"
#include "storage/live_uses.h"
#include "storage/stats.h"
#include "storage/store.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

namespace npucache::storage {
namespace fs = std::filesystem;
namespace {

// 64 KiB: config.json holds one setting.
constexpr std::size_t kMaxConfigBytes = std::size_t{64} << 10;

Store open_store(const std::string& dir) {
  if (!Dir::exists(dir)) throw CacheError("no cache in " + dir + " (no such directory)");
  return Store::open(dir, Create::no);
}

}  // namespace

std::vector<EntryRecord> all_entries(const Store& s, std::vector<std::string>* problems,
                                     std::vector<UnreadIndex>* unread, const Sweeping* held) {
  std::vector<EntryRecord> out;
  const auto unknown = [&](UnreadIndex::Cause cause, const std::string& m, const std::string& why) {
    if (unread) unread->push_back({cause, m, s.index_path(m).string(), why});
  };
  for (const auto& m : s.model_infos()) {
    try {
      if (auto d = held ? s.index(m, *held) : s.index(m)) {
        for (auto& e : d->index.entries) out.push_back(std::move(e));
        if (!d->intact) {
          const std::string why =
              "index " + s.index_path(m).string() + ": " + std::to_string(d->damaged) + " record(s) damaged";
          if (problems) problems->push_back(why);
          unknown(UnreadIndex::Cause::damaged, m, why);
        }
      }
    } catch (const IoError& e) {  // not read (EIO, EMFILE...): its entries may be there
      if (problems) problems->push_back(e.what());
      unknown(UnreadIndex::Cause::io, m, e.what());
    } catch (const format::OtherFormat& e) {  // another build's: its entries are there, unknown here
      if (problems) problems->push_back(e.what());
      unknown(UnreadIndex::Cause::other_format, m, e.what());
    } catch (const CacheError& e) {  // damaged or not ours: no entry of it can be used
      if (problems) problems->push_back(e.what());
      // One of ours (its magic) may hold entries using any object; a file
      // that only shares the name pattern (or is refused) holds none.
      if (is_our_envelope(s.directory(), names::index_file(m), EnvelopeKind::index))
        unknown(UnreadIndex::Cause::damaged, m, e.what());
    }
  }
  return out;
}

std::string collection_blocked(const std::vector<UnreadIndex>& unread) {
  if (unread.empty()) return "";
  const UnreadIndex& u = unread.front();
  std::string text = "no object is collected and no entry evicted to fit while an index is not read whole: ";
  switch (u.cause) {
    case UnreadIndex::Cause::io: text += u.why + " (gc tries again next time)"; break;
    case UnreadIndex::Cause::damaged:
      text += u.why +
              " (its entries may use any object, and are made again from theirs without a compile; `npucache "
              "verify --repair` rewrites the index with its readable entries or removes it, then gc collects)";
      break;
    case UnreadIndex::Cause::other_format:
      text += u.why +
              " (a later npucache uses this cache: its gc collects for both formats; remove that index once no "
              "build of its format uses the cache)";
      break;
  }
  if (unread.size() > 1) text += "; " + std::to_string(unread.size() - 1) + " more index(es) likewise";
  return text;
}

std::size_t file_size(const Store& s, const std::string& key) {
  try {
    auto info = s.directory().sub(names::kObjectsDir, Create::no).stat(names::object_file(key));
    return info ? static_cast<std::size_t>(info->size) : 0;
  } catch (const CacheError&) {
    return 0;
  }
}

bool is_our_envelope(const Dir& d, const std::string& name, EnvelopeKind kind) {
  try {
    auto head = d.head(name, 8);
    return head && has_magic(kind, *head);
  } catch (const Error&) {
    return false;
  }
}

static double last_used(const CacheStats& s, const std::string& path) {
  auto it = s.last_used.find(path);
  return it != s.last_used.end() ? it->second : 0.0;  // never used: evicted first
}

std::map<std::string, std::size_t> unreferenced(const Store& s, const std::vector<EntryRecord>& entries) {
  std::set<std::string> used;
  for (const auto& e : entries) used.insert(e.graph_key);
  std::map<std::string, std::size_t> out;
  for (const auto& key : s.object_keys())
    if (!used.count(key)) out[key] = file_size(s, key);
  return out;
}

std::size_t parse_size(const std::string& text) { return process::parse_size(text); }

std::string format_size(std::size_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

namespace {

// The limit earlier versions kept in config.json, when that file is there.
std::optional<std::size_t> legacy_max_size(const Dir& d) {
  const std::string dir = d.path().string();
  std::optional<std::string> text;
  try {
    text = d.read(names::kConfigFile, kMaxConfigBytes);
  } catch (const CacheError& e) {  // refused (a link, another user's) or unreadable: as damaged
    if (process::Context::current().get<process::Once>().first(std::string("refused settings|") + e.what()))
      log::warn("no size limit is read from {}/{}: {}", dir, names::kConfigFile, e.what());
    return std::nullopt;
  }
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {  // a setting: said once per process, not at every save
    if (process::Context::current().get<process::Once>().first("damaged size limit|" + dir))
      log::warn("{}/{} is damaged; no size limit applies until `npucache config max-size` sets one", dir,
                names::kConfigFile);
    return std::nullopt;
  }
  auto it = j.find("max_size");
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::size_t>();
}

// The text of the cache's npucache.conf, read as every file of the cache
// (no link, none of another user or writable by others, bounded: a shared
// cache directory may hold one someone else planted): nullopt when absent
// or refused, a refusal warned about once per process.
std::optional<std::string> cache_settings_text(const Dir& d) {
  try {
    return d.read(names::kCacheConfigFile, process::kMaxConfigFileBytes);
  } catch (const CacheError& e) {
    if (process::Context::current().get<process::Once>().first(std::string("refused settings|") + e.what()))
      log::warn("the cache's settings are not used: {}", e.what());
    return std::nullopt;
  }
}

std::optional<std::size_t> max_size_in(const Dir& d, std::string* source = nullptr) {
  return process::max_size_setting(d.path().string(), cache_settings_text(d), legacy_max_size(d), source);
}

// A bad setting where a limit is only applied or shown: said once per
// process, and no limit applies.
void warn_no_limit(const ConfigError& e) {
  if (process::Context::current().get<process::Once>().first(std::string("bad max_size|") + e.what()))
    log::warn("no size limit applies: {}", e.what());
}

}  // namespace

std::optional<std::size_t> max_size(const std::string& dir, std::string* source) {
  if (!Dir::exists(dir)) return process::max_size_setting(dir, std::nullopt, std::nullopt, source);
  return max_size_in(Dir::open(dir, Safety::cache, Create::no), source);
}

std::optional<std::size_t> max_size_or_warn(const std::string& dir, std::string* source) {
  try {
    return max_size(dir, source);
  } catch (const ConfigError& e) {
    warn_no_limit(e);
    if (source) source->clear();
    return std::nullopt;
  }
}

namespace {

// The limit a save enforces: a bad setting is warned about once and no
// limit applies (a save never fails over a setting).
std::optional<std::size_t> limit_for_save(const Dir& d) {
  try {
    return max_size_in(d);
  } catch (const ConfigError& e) {
    warn_no_limit(e);
    return std::nullopt;
  }
}

void enforce(const std::string& dir, std::size_t limit, const std::vector<std::string>& written);

}  // namespace

void set_max_size(const std::string& dir, std::optional<std::size_t> limit) {
  const Store s = Store::open(dir, Create::yes);
  const Dir& d = s.directory();
  // A refused file (a link, another user's) is replaced, as a damaged one.
  const std::string old = cache_settings_text(d).value_or("");
  d.write(names::kCacheConfigFile, process::with_max_size(old, limit));
  if (d.stat(names::kConfigFile)) d.remove(names::kConfigFile);  // replaced by npucache.conf
}

void enforce_limit(const std::string& dir, const std::vector<std::string>& written) {
  if (!Dir::exists(dir)) return;
  if (const auto limit = limit_for_save(Dir::open(dir, Safety::cache, Create::no))) enforce(dir, *limit, written);
}

void enforce_limit(const Store& store, const std::vector<std::string>& written) {
  if (const auto limit = limit_for_save(store.directory())) enforce(store.directory().path().string(), *limit, written);
}

namespace {

void enforce(const std::string& dir, std::size_t limit, const std::vector<std::string>& written) {
  GcOptions o;
  o.max_size = limit;
  o.wait_s = kLimitWaitSeconds;
  GcResult g;
  try {
    g = gc(dir, o, written);
  } catch (const CacheBusy& e) {  // another sweep, or writers throughout: the next save tries again
    log::debug("size limit of {} not enforced after this save: {}", dir, e.what());
    return;
  }
  if (!g.blocked.empty() &&  // said once per process: every save runs it
      process::Context::current().get<process::Once>().first("gc blocked|" + dir))
    log::warn("the size limit {} of cache {} is not enforced: {}", format_size(limit), dir, g.blocked);
  if (g.evicted_entries > 0 || g.removed_regions > 0)
    log::info("cache {} over its limit {}: evicted {} layout(s) ({} entries), {} object(s), {} compiled region(s)", dir,
              format_size(limit), g.evicted_layouts, g.evicted_entries, g.removed_objects, g.removed_regions);
  // What was just written is never evicted: a layout larger than the limit
  // stays, and the cache with it over its limit. Said once per process.
  if (g.blocked.empty() && g.remaining_bytes + g.region_bytes > limit &&
      process::Context::current().get<process::Once>().first("over limit|" + dir))
    log::warn(
        "cache {} holds {} of objects and compiled regions, over its limit {}: what this job saved is kept (never "
        "evicted by its own save); raise the limit (npucache config max-size SIZE) or remove other entries (npucache "
        "gc)",
        dir, format_size(g.remaining_bytes + g.region_bytes), format_size(limit));
}

}  // namespace

namespace {

// Whether an object no entry uses is collected: one of npucache's (its
// magic) and of this cache format (another build's is left, as its index
// would be). Else `out.left` names it.
bool collectable(const Store& s, const std::string& key, bool have_objects, GcResult& out) {
  if (!have_objects || !is_our_envelope(s.directory().sub(names::kObjectsDir, Create::no), names::object_file(key),
                                        EnvelopeKind::object)) {
    out.left.push_back(s.object_path(key).string() + " (not an npucache file)");
    return false;
  }
  try {
    (void)s.object_meta(key);
  } catch (const format::OtherFormat& e) {
    out.left.push_back(s.object_path(key).string() + " (of another cache format)");
    return false;
  } catch (const CacheError&) {  // damaged, missing since: collected as any orphan
  }
  return true;
}

// The bytes of the objects `entries` use.
std::size_t used_bytes(const Store& s, const std::vector<EntryRecord>& entries) {
  std::set<std::string> used;
  std::size_t total = 0;
  for (const auto& e : entries)
    if (used.insert(e.graph_key).second) total += file_size(s, e.graph_key);
  return total;
}

// Removes the entries `removals` names (model_info -> entry paths) from
// their indexes, then every object no remaining entry uses (objects
// orphaned before are counted in orphaned_*), removing the templates of
// those objects first; with `out.blocked` set (an index was not read whole
// before the evictions), or when one is not after them, no object.
// Runs under the sweeping lock (no writer between an object and its
// index).
void evict_and_sweep(const Store& s, const std::map<std::string, std::vector<std::string>>& removals,
                     const std::map<std::string, std::size_t>& orphans_before, GcResult& out, const Sweeping& held) {
  std::vector<std::string> removed_paths;
  for (const auto& [m, paths] : removals) {
    out.evicted.insert(out.evicted.end(), paths.begin(), paths.end());
    auto d = s.index(m);
    s.update_index(m, d ? d->index.model : Components{}, {}, paths, held);
    removed_paths.insert(removed_paths.end(), paths.begin(), paths.end());
  }
  if (!removed_paths.empty()) forget_entries(s.dir(), removed_paths);
  // Objects no remaining entry uses (including ones never referenced),
  // unless an index is not read whole, now or at gc's first reading (its
  // entries' objects may be in use): the first reading's verdict stands
  // for the whole run.
  std::set<std::string> used;
  std::vector<UnreadIndex> unread;
  const auto remaining = all_entries(s, nullptr, &unread, &held);
  for (const auto& e : remaining) used.insert(e.graph_key);
  if (out.blocked.empty()) out.blocked = collection_blocked(unread);
  if (!out.blocked.empty()) {
    s.remove_stale_temps();  // no index names a dead writer's temporary
    out.remaining_bytes = used_bytes(s, remaining);
    return;
  }
  // The objects to remove, then their templates before them: a sweep
  // stopped between the two (killed, an I/O error) leaves objects no entry
  // uses, which the next gc collects, never a template naming a missing
  // object (which verify reports as damage).
  const bool have_objects = s.directory().stat(names::kObjectsDir).has_value();
  std::vector<std::string> doomed;
  std::set<std::string> kept;
  for (const auto& key : s.object_keys()) {
    if (used.count(key) || !collectable(s, key, have_objects, out)) {
      kept.insert(key);
      continue;
    }
    doomed.push_back(key);
  }
  out.removed_templates = sweep_templates(s, kept, held);
  for (const auto& key : doomed) {
    s.remove_object(key, held);
    out.removed.push_back(s.object_path(key).string());
    ++out.removed_objects;
    if (const auto o = orphans_before.find(key); o != orphans_before.end()) {
      ++out.orphaned_objects;
      out.orphaned_bytes += o->second;
    }
  }
  s.remove_stale_temps();
  out.remaining_bytes = used_bytes(s, all_entries(s));
}

// What evict_and_sweep would do, done to nothing: the entries `removed`
// names and the objects no other entry uses (none with `out.blocked`) are
// listed in `out`.
void preview_sweep(const Store& s, const std::vector<EntryRecord>& entries, const std::set<std::string>& removed,
                   const std::map<std::string, std::size_t>& orphans_before, GcResult& out) {
  std::set<std::string> used;
  for (const auto& e : entries) {
    if (removed.count(e.path))
      out.evicted.push_back(e.path);
    else
      used.insert(e.graph_key);
  }
  const bool have_objects = s.directory().stat(names::kObjectsDir).has_value();
  for (const auto& key : s.object_keys()) {
    if (used.count(key)) {
      out.remaining_bytes += file_size(s, key);
      continue;
    }
    if (!out.blocked.empty() || !collectable(s, key, have_objects, out)) continue;
    out.removed.push_back(s.object_path(key).string());
    ++out.removed_objects;
    if (const auto o = orphans_before.find(key); o != orphans_before.end()) {
      ++out.orphaned_objects;
      out.orphaned_bytes += o->second;
    }
  }
}

// The class part of a model_info ("npucache.models.Decoder" of
// "npucache.models.Decoder_dynamic_8efea6fcd2ba234c").
std::string model_info_class(const std::string& model_info) {
  for (const char* kind : {"_dynamic_", "_static_", "_auto_"})
    if (const auto at = model_info.rfind(kind); at != std::string::npos) return model_info.substr(0, at);
  return model_info;
}

}  // namespace

std::optional<double> entry_time(const CacheStats& st, const EntryRecord& e) {
  // A time ahead of now (a writer's clock ahead, a planted date) is not
  // trusted: it would keep the entry from every gc until it passed.
  const double now = process::Context::current().env().wall_s();
  const double recorded = last_used(st, e.path);
  const double used = recorded > now + kDateAheadSeconds ? 0.0 : recorded;
  const std::optional<double> saved = format::date_seconds(e.meta.date);
  if (!saved || *saved > now + kDateAheadSeconds) return used > 0 ? std::optional<double>(used) : std::nullopt;
  return std::max(used, *saved);
}

bool entry_of_model(const EntryRecord& e, const std::string& name) {
  const auto cls = e.meta.components.find(component::kModelClass);
  return e.meta.model_info == name || model_info_class(e.meta.model_info) == name ||
         (cls != e.meta.components.end() && cls->second == name);
}

ConfigError no_such_model(const std::string& name, const std::string& dir, const std::vector<EntryRecord>& entries) {
  std::set<std::string> known;
  for (const auto& e : entries) known.insert(model_info_class(e.meta.model_info));
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  return ConfigError("--model '" + name + "': no entry of that model in " + dir +
                     (list.empty() ? std::string(" (it has no entries)")
                                   : "; its models are: " + list + " (or one model_info as `npucache ls` prints)"));
}

namespace {

double now_s() { return process::Context::current().env().wall_s(); }

}  // namespace

GcResult gc(const std::string& dir, std::size_t limit, const std::vector<std::string>& keep) {
  GcOptions o;
  o.max_size = limit;
  return gc(dir, o, keep);
}

GcResult gc(const std::string& dir, const GcOptions& options, const std::vector<std::string>& keep) {
  const Store s = open_store(dir);
  // No writer between its objects and its index (a dry run removes
  // nothing: it takes no lock).
  std::optional<Sweeping> held;
  if (!options.dry_run) held.emplace(s.sweeping(options.wait_s));
  GcResult out;
  out.limit = options.max_size.value_or(0);
  const CacheStats st = read_stats(s.dir());
  // Entries running processes use (their hits are not in stats.json yet):
  // used now, for the age and the size limit alike.
  const LiveUses live = live_uses(s, held ? &*held : nullptr);
  out.live_processes = live.processes;
  std::vector<UnreadIndex> unread;
  const auto entries = all_entries(s, &out.problems, &unread, held ? &*held : nullptr);
  out.blocked = collection_blocked(unread);
  out.entries = entries.size();
  const auto orphans_before = unreferenced(s, entries);
  const std::set<std::string> fresh(keep.begin(), keep.end());
  std::map<std::string, std::vector<std::string>> removals;  // model_info -> entry paths
  std::set<std::string> removed;                             // entry paths
  std::set<std::pair<std::string, int>> evicted_layouts;
  // An index not read whole is not rewritten by an eviction (the rewrite
  // would drop its damaged records, and with them what keeps their
  // objects): verify --repair is for that.
  std::map<std::string, std::string> unread_models;  // model_info -> its index
  for (const auto& u : unread) unread_models.emplace(u.model_info, u.path);
  std::set<std::string> kept_models;
  const auto evict = [&](const EntryRecord& e) {
    if (const auto u = unread_models.find(e.meta.model_info); u != unread_models.end()) {
      if (kept_models.insert(u->first).second)
        out.problems.push_back("no entry of index " + u->second +
                               " is evicted: it is not read whole (`npucache verify --repair` first)");
      return;
    }
    if (fresh.count(e.path) || !removed.insert(e.path).second) return;
    removals[e.meta.model_info].push_back(e.path);
    evicted_layouts.insert({e.meta.model_info, e.meta.rank.world_size});
    ++out.evicted_entries;
  };
  // 1. One model: every stage file of its class, or one model_info.
  for (const auto& name : options.models) {
    std::size_t matched = 0;
    for (const auto& e : entries) {
      if (entry_of_model(e, name)) {
        ++matched;
        evict(e);
      }
    }
    if (matched == 0) throw no_such_model(name, s.dir().string(), entries);
  }
  // 2. By age: entries last used (saved or served) longer ago than that.
  if (options.older_than_s) {
    const double cutoff = now_s() - *options.older_than_s;
    for (const auto& e : entries)
      if (const auto t = entry_time(st, e); t && *t < cutoff) {
        if (live.entries.count(e.path)) {
          out.in_use.push_back(e.path);
          continue;
        }
        evict(e);
      }
  }
  // 3. By size: the objects the remaining entries use and the compiled
  // regions together. Regions go first, least recently used first: losing
  // one costs one compile of a layer, never an entry. Then whole layouts
  // (model_info, world size), least recently used first.
  // Each region read once, for the limit and the sweep (a later cache
  // format's is not this build's to size out; an earlier one's, stale, goes
  // first).
  const std::vector<StoredRegion> listing = stored_regions(s, true);
  std::vector<StoredRegion> regions;
  for (const auto& r : listing)
    if (r.ours && r.other_format.empty()) regions.push_back(r);
  std::stable_sort(regions.begin(), regions.end(), [](const StoredRegion& a, const StoredRegion& b) {
    return std::make_pair(a.stale.empty(), a.mtime_ns) < std::make_pair(b.stale.empty(), b.mtime_ns);
  });
  std::size_t region_bytes = 0;
  for (const auto& r : regions) region_bytes += r.bytes;
  std::set<std::string> sized_out;  // regions removed to fit
  if (options.max_size) {
    struct Layout {
      std::string model_info;
      double used = 0;
      bool fresh = false;  // holds an entry just written: never evicted
      std::vector<const EntryRecord*> entries;
    };
    std::map<std::pair<std::string, int>, Layout> layouts;
    std::map<std::string, int> refs;
    std::size_t total = 0;
    for (const auto& e : entries) {
      if (removed.count(e.path)) continue;
      Layout& l = layouts[{e.meta.model_info, e.meta.rank.world_size}];
      l.model_info = e.meta.model_info;
      // Its last recorded use, else its save (a process's uses reach
      // stats.json when it ends; one killed never writes them).
      l.used = std::max(l.used, live.entries.count(e.path) ? now_s() : entry_time(st, e).value_or(0.0));
      l.fresh = l.fresh || fresh.count(e.path) > 0;
      l.entries.push_back(&e);
      if (refs[e.graph_key]++ == 0) total += file_size(s, e.graph_key);
    }
    // While blocked, no entry is evicted, so regions go only when they
    // alone can bring the total within the limit (else every save would
    // remove every region, and the next compiles make them again).
    const bool regions_can_fit = out.blocked.empty() || total <= *options.max_size;
    for (const auto& r : regions) {
      if (!regions_can_fit || total + region_bytes <= *options.max_size) break;
      sized_out.insert(r.key);
      region_bytes -= r.bytes;
    }
    // While an index is not read whole no object is collected: evicting
    // entries to fit would lose them and free nothing (regions, which no
    // entry names, still go above).
    std::vector<Layout*> order;
    if (out.blocked.empty())
      for (auto& [k, l] : layouts) order.push_back(&l);
    std::stable_sort(order.begin(), order.end(), [](const Layout* a, const Layout* b) { return a->used < b->used; });
    for (Layout* l : order) {
      if (total <= *options.max_size) break;
      if (l->fresh) continue;
      for (const EntryRecord* e : l->entries) {
        evict(*e);
        if (--refs[e->graph_key] == 0) total -= file_size(s, e->graph_key);
      }
    }
  }
  out.evicted_layouts = evicted_layouts.size();
  if (held)
    evict_and_sweep(s, removals, orphans_before, out, *held);
  else
    preview_sweep(s, entries, removed, orphans_before, out);
  // 4. Compiled regions: no entry names one (a method's object holds its
  // regions' programs itself), so they go by their last use alone, the
  // damaged ones, and those the size limit removed.
  const auto region_path = [&](const std::string& key) {
    return (s.dir() / names::kRegionsDir / names::region_file(key)).string();
  };
  std::set<std::string> gone;
  for (const auto& key : sweep_regions(s, listing, options.older_than_s, now_s(), held ? &*held : nullptr)) {
    out.removed.push_back(region_path(key));
    gone.insert(key);
  }
  for (const auto& key : sized_out) {
    if (gone.count(key)) continue;
    if (held) remove_region(s, key, *held);
    out.removed.push_back(region_path(key));
    gone.insert(key);
  }
  out.removed_regions = gone.size();
  for (const auto& r : regions)
    if (!gone.count(r.key)) out.region_bytes += r.bytes;
  return out;
}

double parse_age(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  static const std::map<std::string, double> kUnits = {{"s", 1},    {"m", 60},    {"min", 60},
                                                       {"h", 3600}, {"d", 86400}, {"w", 604800}};
  const auto u = kUnits.find(unit);
  if (text.empty() || end == text.c_str() || u == kUnits.end() || !std::isfinite(v) || v < 0)
    throw ConfigError("'" + text +
                      "' is not an age: give a number with a unit, s, m (or min), h, d or w, e.g. 36h or 7d");
  return v * u->second;
}

}  // namespace npucache::storage
