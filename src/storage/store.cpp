#include "storage/store.h"

#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/object_file.h"
#include "log/log.h"
#include "process/context.h"
#include "process/env.h"
#include "process/once.h"

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace npucache::storage {
namespace fs = std::filesystem;
namespace {

// Caps on what a file of each kind may be before it is read: a damaged or
// foreign file cannot make a reader allocate without bound.
constexpr std::size_t kMaxIndexBytes = std::size_t{256} << 20;
constexpr std::size_t kMaxObjectBytes = std::size_t{17} << 30;

// An index is its base, <model_info>.h5, and the deltas that extend it,
// deltas/<model_info>.<first>.h5, each naming the base's generation and the
// sequence numbers [first, last] of the commits it holds; the next delta
// starts at last + 1. A commit writes a delta of what it changes, merged
// with the newest deltas no larger than what it carries (so a model has
// O(log) deltas, each entry rewritten O(log) times); when the deltas hold
// more than a quarter of the base's entries (at least kMinCompaction), or
// would be more than kMaxDeltaFiles files, the commit writes a new base
// of every entry instead (a new generation) and removes the deltas. Every
// state a reader can meet is whole: a delta, a merged delta and a base are
// each published by one rename; merged deltas and deltas of an earlier
// generation left behind are never reached from the base.
constexpr std::size_t kMinCompaction = 16;
// A model of at most this many entries is always rewritten whole: that
// costs little (tens of microseconds an entry), and its one file shows
// every entry to h5dump at the seed's paths. Deltas are for the models
// whose rewrite would cost more than the commit.
constexpr std::size_t kWholeUpTo = 32;
constexpr std::size_t kMaxDeltaFiles = 12;
// A reader that keeps meeting a changing index gives up after this many
// tries (each try is a handful of stats while nothing changes).
constexpr int kSnapshotTries = 100;

// A process keeps each index file it decoded while the file stays the
// same (inode, modification time, size), and each model's merged index
// while its files do, once they have settled (below): a warm start of
// several methods of a model reads its files once. A service of the
// process context.
bool same(const Dir::Info& a, const Dir::Info& b) {
  return a.ino == b.ino && a.mtime_ns == b.mtime_ns && a.size == b.size;
}
// A file's stat vouches for its bytes only if the file had settled, been
// modified at least kSettled ago, when the bytes were read: a file's time
// is as coarse as the file system's clock (milliseconds, a second or two
// on ext3, older ext4 and many NFS servers), and a rename frees an inode
// the next temporary takes again, so a file rewritten within that
// granularity can be another file of the same inode, time and size. A
// file modified after a settled read cannot have the time it had then.
// A decoding made while its file was recent is never trusted by stat,
// however long ago that was: its file is read again (and the decoding
// reused when the bytes are the ones decoded). The clock is the Env's.
constexpr int64_t kSettledNs = int64_t{2} * 1000000000;
bool settled(const Dir::Info& i) {
  const auto now = static_cast<int64_t>(process::Context::current().env().wall_s() * 1e9);
  return i.mtime_ns < now - kSettledNs;
}
using Decoded = std::shared_ptr<const DecodedIndex>;
struct CachedIndex {
  Dir::Info seen;
  bool trusted = false;  // `seen` had settled when the bytes were read
  std::string digest;    // of the bytes decoded
  Decoded decoded;
};
struct CachedMerge {
  std::vector<Dir::Info> files;  // the base and the deltas, as merged (all settled then)
  Decoded merged;
};
struct IndexCache {
  std::mutex mu;
  std::map<std::string, CachedIndex> by_path;
  std::map<std::string, CachedMerge> merged;  // by the base's path
};
IndexCache& index_cache() { return process::Context::current().get<IndexCache>(); }

// Whether a decoding may stand for a file by its stat alone (readers), or
// only by its bytes (a commit under the model's lock: what it writes back
// must be what the file holds, whatever a clock or a file system says).
enum class Trust { stat, bytes };

// One index file, decoded; null when it is gone. From the cache when it
// is unchanged since a settled read (Trust::stat); otherwise it is read
// again, and its decoding reused when its bytes are those decoded (their
// digest): a restart right after a save decodes nothing twice.
Decoded decode_file(const Dir& d, const std::string& name, const Dir::Info& seen, std::size_t cap, Trust trust) {
  const std::string key = (d.path() / name).string();
  IndexCache& cache = index_cache();
  std::string known;
  {
    std::lock_guard lock(cache.mu);
    auto it = cache.by_path.find(key);
    if (it != cache.by_path.end()) {
      if (trust == Trust::stat && it->second.trusted && same(it->second.seen, seen)) return it->second.decoded;
      known = it->second.digest;
    }
  }
  const bool trusted = settled(seen);  // judged before the read: a file settled then is the one read
  auto bytes = d.read(name, cap);
  if (!bytes) return nullptr;
  std::string digest = checksum(*bytes);
  if (!known.empty() && digest == known) {
    std::lock_guard lock(cache.mu);
    auto it = cache.by_path.find(key);
    if (it != cache.by_path.end() && it->second.digest == digest) {
      it->second.seen = seen;
      it->second.trusted = trusted;
      return it->second.decoded;
    }
  }
  auto decoded = std::make_shared<const DecodedIndex>(decode_index(*bytes, "index " + key));
  std::lock_guard lock(cache.mu);
  cache.by_path[key] = {seen, trusted, std::move(digest), decoded};
  return decoded;
}

// A model's index as one state: its base and the deltas reached from it.
struct Snapshot {
  std::string base_key;
  Decoded base;
  struct Delta {
    std::string name, path;
    std::size_t records = 0;  // entries and removals
    Decoded decoded;
  };
  std::vector<Delta> deltas;
  std::vector<Dir::Info> seen;  // of the base and each delta
  uint64_t last = 0;            // the last sequence number the state includes
  std::vector<std::string> problems;

  bool intact() const {
    bool ok = base->intact && problems.empty();
    for (const auto& d : deltas) ok = ok && d.decoded->intact;
    return ok;
  }
  bool hdf5_intact() const {
    bool ok = base->hdf5_intact;
    for (const auto& d : deltas) ok = ok && d.decoded->hdf5_intact;
    return ok;
  }
  // Whether the state holds entry `path`: its newest mention.
  bool holds(const std::string& path) const {
    const auto in = [&path](const std::vector<EntryRecord>& es) {
      auto it = std::lower_bound(es.begin(), es.end(), path,
                                 [](const EntryRecord& e, const std::string& p) { return e.path < p; });
      return it != es.end() && it->path == path;
    };
    for (auto d = deltas.rbegin(); d != deltas.rend(); ++d) {
      if (in(d->decoded->index.entries)) return true;
      const auto& r = d->decoded->index.seq.removed;
      if (std::find(r.begin(), r.end(), path) != r.end()) return false;
    }
    return in(base->index.entries);
  }
  DecodedIndex merge() const {
    DecodedIndex m;
    m.index.model_info = base->index.model_info;
    m.index.model = base->index.model;
    m.index.seq = base->index.seq;
    m.index.seq.last = last;
    m.damaged = base->damaged + problems.size();
    m.intact = intact();
    m.hdf5_intact = hdf5_intact();
    m.earlier_format = base->earlier_format;
    m.sequenced = base->sequenced;
    m.files.push_back(base_key);
    m.problems = problems;
    if (deltas.empty()) {
      m.index.entries = base->index.entries;
      return m;
    }
    std::map<std::string, const EntryRecord*> at;
    for (const auto& e : base->index.entries) at[e.path] = &e;
    for (const auto& d : deltas) {
      for (const auto& p : d.decoded->index.seq.removed) at.erase(p);
      for (const auto& e : d.decoded->index.entries) at[e.path] = &e;
      m.index.model = d.decoded->index.model;
      m.damaged += d.decoded->damaged;
      m.files.push_back(d.path);
    }
    m.index.entries.reserve(at.size());
    for (const auto& [p, e] : at) m.index.entries.push_back(*e);
    return m;
  }
};

uint64_t new_generation() {
  std::random_device rd;
  uint64_t g = 0;
  while (g == 0) g = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return g;
}

// Reads a model's index without a lock. Each try stats and reads the base,
// then the deltas from base.last + 1 on until a name is absent (or holds a
// file that is not the next delta of this base), then stats them all
// again: when nothing changed, what was read is the state at the moment
// the last name was found absent (files are only ever replaced by a
// rename, never rewritten in place). A writer that replaced or removed one
// of them meanwhile makes the reader try again.
std::optional<Snapshot> read_snapshot(const Dir& dir, const std::string& model_info, std::size_t cap, Trust trust) {
  const std::string base_name = names::index_file(model_info);
  const std::string base_key = (dir.path() / base_name).string();
  for (int attempt = 0; attempt < kSnapshotTries; ++attempt) {
    auto base_seen = dir.stat(base_name);
    if (!base_seen) return std::nullopt;
    Snapshot snap;
    snap.base_key = base_key;
    snap.base = decode_file(dir, base_name, *base_seen, cap, trust);
    if (!snap.base) continue;  // replaced or removed since its stat
    const DecodedIndex& base = *snap.base;
    if (base.index.model_info != model_info)
      throw CacheError("index " + base_key + " names model " + base.index.model_info);
    snap.last = base.index.seq.last;
    snap.seen.push_back(*base_seen);
    std::optional<Dir> deltas;
    std::string end_name;               // the name the walk stopped at
    std::optional<Dir::Info> end_seen;  // what it held then
    if (base.sequenced && !base.earlier_format && !base.index.seq.delta && dir.stat(names::kDeltasDir)) {
      deltas = dir.sub(names::kDeltasDir, Create::no);
      for (;;) {
        end_name = names::delta_file(model_info, snap.last + 1);
        end_seen = deltas->stat(end_name);
        if (!end_seen) break;
        const std::string path = (deltas->path() / end_name).string();
        const std::string what = "delta " + path;
        Decoded d;
        try {
          if (!end_seen->regular) throw CacheError(what + " is not a regular file");
          d = decode_file(*deltas, end_name, *end_seen, cap, trust);
        } catch (const CacheRefused&) {
          throw;
        } catch (const IoError&) {
          throw;
        } catch (const CacheError& e) {
          snap.problems.push_back(std::string(e.what()) + "; the entries it and later deltas added are lost");
          break;
        }
        if (!d) break;  // removed since its stat: the check below tries again
        const SequenceRecord& q = d->index.seq;
        if (d->sequenced && (!q.delta || q.generation != base.index.seq.generation)) break;  // left behind
        if (!d->sequenced || q.first != snap.last + 1 || d->index.model_info != model_info) {
          snap.problems.push_back(what + " is damaged: its sequence record " +
                                  (d->sequenced ? "does not continue the index" : "cannot be read") +
                                  "; the entries it and later deltas added are lost");
          break;
        }
        snap.seen.push_back(*end_seen);
        snap.last = q.last;
        snap.deltas.push_back({end_name, path, d->index.entries.size() + q.removed.size(), d});
        end_seen.reset();
      }
    }
    // Nothing changed while it was read?
    auto now = dir.stat(base_name);
    bool changed = !now || !same(*now, *base_seen);
    for (std::size_t i = 0; !changed && i < snap.deltas.size(); ++i) {
      now = deltas->stat(snap.deltas[i].name);
      changed = !now || !same(*now, snap.seen[i + 1]);
    }
    if (!changed && deltas) {
      now = deltas->stat(end_name);
      changed = now.has_value() != end_seen.has_value() || (now && !same(*now, *end_seen));
    }
    if (!changed) return snap;
  }
  throw IoError("index " + base_key + " kept changing while it was read", EAGAIN);
}

// The merged index of a snapshot (from the cache while its files are the same).
Decoded merged(const Snapshot& snap) {
  IndexCache& cache = index_cache();
  {
    std::lock_guard lock(cache.mu);
    auto it = cache.merged.find(snap.base_key);
    if (it != cache.merged.end() && it->second.files.size() == snap.seen.size() &&
        std::equal(snap.seen.begin(), snap.seen.end(), it->second.files.begin(), same))
      return it->second.merged;
  }
  if (snap.deltas.empty() && snap.problems.empty()) return snap.base;
  auto m = std::make_shared<const DecodedIndex>(snap.merge());
  if (!std::all_of(snap.seen.begin(), snap.seen.end(), settled)) return m;
  std::lock_guard lock(cache.mu);
  cache.merged[snap.base_key] = {snap.seen, m};
  return m;
}

}  // namespace

Store Store::open(const fs::path& dir, Create create) {
  Store s(Dir::open(dir, Safety::cache, create));
  if (create == Create::yes) s.mark();
  return s;
}

Dir Store::objects(Create create) const { return dir_.sub(names::kObjectsDir, create); }

fs::path Store::object_path(const std::string& key) const {
  return dir_.path() / names::kObjectsDir / names::object_file(key);
}
fs::path Store::index_path(const std::string& model_info) const { return dir_.path() / names::index_file(model_info); }

std::optional<DecodedIndex> Store::index(const std::string& model_info) const {
  auto snap = read_snapshot(dir_, model_info, kMaxIndexBytes, Trust::stat);
  if (!snap) return std::nullopt;
  return *merged(*snap);
}

std::optional<DecodedIndex> Store::index(const std::string& model_info, const Sweeping&) const {
  auto snap = read_snapshot(dir_, model_info, kMaxIndexBytes, Trust::bytes);
  if (!snap) return std::nullopt;
  return snap->merge();  // of these bytes, never a merge kept by the files' stats
}

std::optional<EntryRecord> Store::entry(const std::string& path) const {
  const std::string model_info = names::model_info_of(path);
  auto d = index(model_info);
  if (!d) return std::nullopt;
  for (const auto& e : d->index.entries)
    if (e.path == path) return e;
  if (!d->intact)
    throw CacheError("index " + index_path(model_info).string() + " is damaged (" + std::to_string(d->damaged) +
                     " record(s) unreadable) and entry " + path + " is not among its readable ones");
  return std::nullopt;
}

std::vector<std::string> Store::model_infos() const {
  std::vector<std::string> out;
  for (const auto& n : dir_.list())
    if (auto m = names::index_model_info(n); !m.empty()) out.push_back(m);
  return out;
}

bool Store::has_object(const std::string& key) const {
  try {
    auto info = objects(Create::no).stat(names::object_file(key));
    return info && info->regular && info->ours;
  } catch (const CacheError&) {
    return false;
  }
}

std::vector<std::string> Store::object_keys() const {
  std::vector<std::string> out;
  if (!dir_.stat(names::kObjectsDir)) return out;
  for (const auto& n : objects(Create::no).list())
    if (auto k = names::object_key(n); !k.empty()) out.push_back(k);
  return out;
}

ObjectRecord Store::object(const std::string& key, bool with_text) const {
  const std::string what = "object file " + object_path(key).string();
  if (!dir_.stat(names::kObjectsDir)) throw CacheError(what + " is missing");
  auto bytes = objects(Create::no).read(names::object_file(key), kMaxObjectBytes);
  if (!bytes) throw CacheError(what + " is missing");
  ObjectRecord o = decode_object(*bytes, what, with_text);
  if (o.graph_key != key) throw CacheError(what + " holds object " + o.graph_key);
  return o;
}

ObjectMeta Store::object_meta(const std::string& key) const {
  const std::string what = "object file " + object_path(key).string();
  if (!dir_.stat(names::kObjectsDir)) throw CacheError(what + " is missing");
  // The header and records only (the userblock): never the artifact.
  const Dir obj = objects(Create::no);
  const std::string name = names::object_file(key);
  const auto info = obj.stat(name);
  if (!info) throw CacheError(what + " is missing");
  constexpr std::size_t kFirstRead = 4096;
  auto head = obj.head(name, kFirstRead);
  if (!head) throw CacheError(what + " is missing");
  if (const std::size_t u = format::envelope_userblock(*head); u > head->size() && head->size() == kFirstRead) {
    head = obj.head(name, u);
    if (!head) throw CacheError(what + " is missing");
  }
  std::string stored_key;
  ObjectMeta m = storage::object_meta(*head, what, &stored_key);
  if (stored_key != key) throw CacheError(what + " holds object " + stored_key);
  m.stored_size = static_cast<uint64_t>(std::max<int64_t>(info->size, 0));
  return m;
}

Store::Put Store::put_object(const ObjectRecord& o, const StoreLock& held, const Check& usable) const {
  const Dir obj = objects(Create::yes);
  const std::string name = names::object_file(o.graph_key);
  const std::string bytes = encode_object(o);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (obj.publish(name, bytes)) {
      Put p{o, false};
      p.stored.meta.stored_size = bytes.size();
      return p;
    }
    // Another writer stored the key first: adopt its bytes, unless they are
    // damaged (then they are replaced).
    auto seen = obj.stat(name);
    try {
      ObjectRecord stored = object(o.graph_key, true);
      if (usable) usable(stored);
      const bool other = stored.meta.checksum != o.meta.checksum;
      return {std::move(stored), other};
    } catch (const CacheRefused&) {
      throw;
    } catch (const IoError&) {
      throw;  // unread, not damaged: it may be what other entries use
    } catch (const Error& e) {
      log::warn("stored object {} is unusable ({}); replacing it", o.graph_key, e.what());
      if (seen) remove_damaged_object(o.graph_key, *seen, held);
    }
  }
  throw CacheError("could not store object " + o.graph_key + ": another process keeps replacing it");
}

Store::Committed Store::commit(Commit c, const Check& usable) const { return commit(std::move(c), writing(), usable); }

Store::Committed Store::commit(Commit c, const Writing& held, const Check& usable) const {
  Committed out;
  for (const auto& o : c.objects) {
    if (out.kept.count(o.graph_key)) continue;  // one object per key in a commit
    Put p = put_object(o, held, usable);
    if (p.adopted) out.adopted.insert(o.graph_key);
    out.kept.emplace(o.graph_key, std::move(p.stored));
  }
  // Every other entry names an object the writer found stored: pinned now
  // (no sweep runs while `held` is), or stored again from the writer's
  // copy, or the entry is left out -- never an index naming a missing object.
  std::map<std::string, bool> present;  // graph key -> stored now
  std::vector<EntryRecord> entries;
  for (auto& e : c.entries) {
    if (out.kept.count(e.graph_key)) {
      entries.push_back(std::move(e));
      continue;
    }
    auto [it, fresh] = present.emplace(e.graph_key, false);
    if (fresh) {
      it->second = object_stat(e.graph_key).has_value();
      if (!it->second) {
        const auto copy = std::find_if(c.pinned.begin(), c.pinned.end(),
                                       [&](const ObjectRecord& o) { return o.graph_key == e.graph_key; });
        if (copy != c.pinned.end()) {
          log::info("stored object {} was removed (gc, clear or verify --repair) since it was read; storing it again",
                    e.graph_key);
          Put p = put_object(*copy, held, usable);
          if (p.adopted) out.adopted.insert(e.graph_key);
          out.kept.emplace(e.graph_key, std::move(p.stored));
          it->second = true;
        }
      }
    }
    if (it->second) {
      entries.push_back(std::move(e));
    } else {
      log::warn(
          "cache entry {} is not saved: its object {} was removed (gc, clear or verify --repair) since it was "
          "read; the next run compiles it",
          e.path, e.graph_key);
      out.unpinned.push_back(e.path);
    }
  }
  c.entries = std::move(entries);
  std::map<std::string, std::vector<EntryRecord>> by_model;
  for (auto& e : c.entries) {
    if (const auto it = out.kept.find(e.graph_key); it != out.kept.end()) {
      e.object_checksum = it->second.meta.checksum;
      e.with_program = it->second.meta.with_program;  // what the kept bytes hold
    }
    by_model[names::model_info_of(e.path)].push_back(e);
  }
  for (const auto& [model_info, es] : by_model)
    update_index(model_info, model_components(es.front().meta.components), es, {}, held,
                 c.keep_later ? &out.kept_later : nullptr);
  if (!out.kept_later.empty()) {
    const std::set<std::string> left(out.kept_later.begin(), out.kept_later.end());
    std::erase_if(c.entries, [&](const EntryRecord& e) { return left.count(e.path) > 0; });
  }
  out.entries = std::move(c.entries);
  return out;
}

void Store::remove_object(const std::string& key, const Sweeping&) const {
  if (!dir_.stat(names::kObjectsDir)) return;
  objects(Create::no).remove(names::object_file(key));
}

std::optional<Dir::Info> Store::object_stat(const std::string& key) const {
  if (!dir_.stat(names::kObjectsDir)) return std::nullopt;
  return objects(Create::no).stat(names::object_file(key));
}

void Store::remove_damaged_object(const std::string& key, const Dir::Info& seen, const StoreLock&) const {
  if (!dir_.stat(names::kObjectsDir)) return;
  const FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(names::kRepairLock);
  const Dir obj = objects(Create::no);
  const std::string name = names::object_file(key);
  const auto now = obj.stat(name);
  // Already replaced by another writer (which may have got the freed inode
  // number back, so its size and time are compared too).
  if (!now || now->ino != seen.ino || now->size != seen.size || now->mtime_ns != seen.mtime_ns) return;
  obj.remove(name);
}

std::size_t Store::remove_stale_temps() const {
  std::size_t n = dir_.remove_stale_temps();
  for (const char* sub : {names::kObjectsDir, names::kDeltasDir})
    if (dir_.stat(sub)) n += dir_.sub(sub, Create::no).remove_stale_temps();
  return n;
}

void Store::remove_deltas(const std::string& model_info) const {
  if (!dir_.stat(names::kDeltasDir)) return;
  const Dir deltas = dir_.sub(names::kDeltasDir, Create::no);
  for (const auto& n : deltas.list())
    if (names::delta_of(n).first == model_info) deltas.remove(n);
}

std::size_t Store::update_index(const std::string& model_info, const Components& model,
                                const std::vector<EntryRecord>& put, const std::vector<std::string>& remove) const {
  const Writing held = writing();
  return update_index(model_info, model, put, remove, held);
}

std::size_t Store::update_index(const std::string& model_info, const Components& model,
                                const std::vector<EntryRecord>& put, const std::vector<std::string>& remove,
                                const StoreLock&, std::vector<std::string>* kept_later) const {
  FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(model_info + ".lock");
  std::size_t lost = 0;
  std::optional<Snapshot> snap;
  try {
    snap = read_snapshot(dir_, model_info, kMaxIndexBytes, Trust::bytes);
    if (snap && !snap->intact()) {
      const DecodedIndex m = snap->merge();
      lost = m.damaged;
      for (const auto& p : m.problems) log::warn("{}", p);
      log::warn("index {} is damaged: {} record(s) unreadable; its {} readable entries are kept in a new index",
                index_path(model_info).string(), m.damaged, m.index.entries.size());
    }
  } catch (const CacheRefused&) {
    throw;
  } catch (const IoError&) {
    throw;  // unread, not damaged: replacing it would lose its entries
  } catch (const CacheError& e) {
    log::warn("{}; writing a new index", e.what());
    lost = 1;
    snap.reset();
  }
  for (const auto& e : put)
    if (names::model_info_of(e.path) != model_info)
      throw CacheError("entry " + e.path + " is not an entry of model " + model_info);
  // What this commit changes: removals of entries the index holds, and
  // the entries it puts.
  std::map<std::string, std::optional<EntryRecord>> change;
  for (const auto& p : remove)
    if (snap && snap->holds(p)) change[p] = std::nullopt;
  // kept_later: paths the index holds saved after `put`'s (by time, with
  // the dates' zones; a date ahead of now, or one that does not parse, is
  // not later) whose object is stored (a broken entry is replaced).
  std::set<std::string> later;
  if (kept_later && snap) {
    const DecodedIndex held = snap->merge();
    const double ahead = process::Context::current().env().wall_s() + kDateAheadSeconds;
    std::map<std::string, const EntryRecord*> at;
    for (const auto& h : held.index.entries) at[h.path] = &h;
    for (const auto& e : put) {
      const auto h = at.find(e.path);
      if (h == at.end()) continue;
      const auto mine = date_seconds(h->second->meta.date), theirs = date_seconds(e.meta.date);
      if (mine && theirs && *mine > *theirs && *mine <= ahead && object_stat(h->second->graph_key) &&
          later.insert(e.path).second)
        kept_later->push_back(e.path);
    }
  }
  for (const auto& e : put)
    if (!later.count(e.path)) change[e.path] = e;
  const std::string name = names::index_file(model_info);
  const bool whole =
      snap && snap->intact() && snap->hdf5_intact() && snap->base->sequenced && !snap->base->earlier_format;
  if (whole && change.empty()) return lost;  // nothing to write
  // How many entries the index holds after the commit: the base's, and
  // the difference each path the deltas or the commit name makes.
  std::size_t after = 0;
  if (snap) {
    std::set<std::string> touched;
    for (const auto& d : snap->deltas) {
      for (const auto& e : d.decoded->index.entries) touched.insert(e.path);
      for (const auto& p : d.decoded->index.seq.removed) touched.insert(p);
    }
    for (const auto& [p, e] : change) touched.insert(p);
    Snapshot base_only;
    base_only.base = snap->base;
    std::ptrdiff_t n = static_cast<std::ptrdiff_t>(snap->base->index.entries.size());
    for (const auto& p : touched) {
      const auto c = change.find(p);
      const bool now = c != change.end() ? c->second.has_value() : snap->holds(p);
      n += static_cast<std::ptrdiff_t>(now) - static_cast<std::ptrdiff_t>(base_only.holds(p));
    }
    after = n > 0 ? static_cast<std::size_t>(n) : 0;
  } else {
    after = change.size();
  }
  if (after == 0) {
    dir_.remove(name);  // first the base: deltas without it are never read
    remove_deltas(model_info);
    return lost;
  }
  if (whole && after > kWholeUpTo) {
    // The newest deltas no larger than what they and this commit carry are
    // merged into the new delta.
    std::size_t from = snap->deltas.size(), carried = change.size();
    while (from > 0 && snap->deltas[from - 1].records <= carried) carried += snap->deltas[--from].records;
    std::size_t records = carried;
    for (std::size_t i = 0; i < from; ++i) records += snap->deltas[i].records;
    const std::size_t base_entries = snap->base->index.entries.size();
    if (records <= std::max(kMinCompaction, base_entries / 4) && from + 1 <= kMaxDeltaFiles) {
      IndexFile ix;
      ix.model_info = model_info;
      ix.model = model;
      ix.seq.delta = true;
      ix.seq.generation = snap->base->index.seq.generation;
      ix.seq.first = from < snap->deltas.size() ? snap->deltas[from].decoded->index.seq.first : snap->last + 1;
      ix.seq.last = snap->last + 1;
      std::map<std::string, std::optional<EntryRecord>> carry;
      for (std::size_t i = from; i < snap->deltas.size(); ++i) {
        for (const auto& p : snap->deltas[i].decoded->index.seq.removed) carry[p] = std::nullopt;
        for (const auto& e : snap->deltas[i].decoded->index.entries) carry[e.path] = e;
      }
      for (auto& [p, e] : change) carry[p] = std::move(e);
      for (auto& [p, e] : carry) {
        if (e)
          ix.entries.push_back(std::move(*e));
        else
          ix.seq.removed.push_back(p);
      }
      const Dir deltas = dir_.sub(names::kDeltasDir, Create::yes);
      deltas.write(names::delta_file(model_info, ix.seq.first), encode_index(ix));
      // Merged into the new one: no longer reached from the base.
      for (std::size_t i = from + 1; i < snap->deltas.size(); ++i) deltas.remove(snap->deltas[i].name);
      return lost;
    }
  }
  // A new base: of a new model, when the deltas are due to be compacted, or
  // to salvage a damaged index. Its new generation leaves every delta
  // behind at once; they are removed after it is in place.
  std::map<std::string, EntryRecord> entries;
  if (snap)
    for (auto& e : snap->merge().index.entries) entries[e.path] = std::move(e);
  for (auto& [p, e] : change) {
    if (e)
      entries[p] = std::move(*e);
    else
      entries.erase(p);
  }
  IndexFile ix;
  ix.model_info = model_info;
  ix.model = model;
  ix.seq.generation = new_generation();
  ix.seq.last = snap ? snap->last + 1 : 0;
  ix.entries.reserve(entries.size());
  for (auto& [p, e] : entries) ix.entries.push_back(std::move(e));
  dir_.write(name, encode_index(ix));
  remove_deltas(model_info);
  return lost;
}

bool Store::index_damaged(const std::string& model_info) const {
  try {
    auto d = index(model_info);
    return d && (!d->intact || !d->hdf5_intact);
  } catch (const CacheError&) {
    return true;
  }
}

void Store::heal_index(const std::string& model_info) const {
  Components model;
  try {
    if (auto d = index(model_info)) model = d->index.model;
  } catch (const CacheError&) {
  }
  log::warn("rewriting damaged index {}", index_path(model_info).string());
  update_index(model_info, model, {}, {});
}

void Store::remove_index(const std::string& model_info, const Sweeping&) const {
  FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(model_info + ".lock");
  dir_.remove(names::index_file(model_info));  // first the base: deltas without it are never read
  remove_deltas(model_info);
}

}  // namespace npucache::storage
