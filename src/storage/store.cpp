#include "storage/store.h"

#include "format/cache_error.h"
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
#include <chrono>
#include <map>
#include <mutex>
#include <random>

namespace npucache::cache {
namespace fs = std::filesystem;
namespace {

// Caps on what a file of each kind may be before it is read: a damaged or
// foreign file cannot make a reader allocate without bound.
constexpr std::size_t kMaxIndexBytes = std::size_t{256} << 20;
constexpr std::size_t kMaxObjectBytes = std::size_t{17} << 30;

// A process keeps each index it decoded while the file stays the same
// (inode, modification time, size): a warm start of several methods of a
// model reads its index once. A service of the process context.
struct CachedIndex {
  Dir::Info seen;
  DecodedIndex decoded;
};
struct IndexCache {
  std::mutex mu;
  std::map<std::string, CachedIndex> by_path;
};
IndexCache& index_cache() { return process::Context::current().get<IndexCache>(); }

std::string new_store_id() {
  std::random_device rd;
  const uint64_t a = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  const uint64_t b = static_cast<uint64_t>(::getpid()) ^
                     static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(XXH3_64bits(&b, sizeof b)));
  return buf;
}

// A literal, not a static string: markers are healed by the statistics
// flush at exit, after function-local statics may have been destroyed.
constexpr std::string_view cachedir_tag() {
  return "Signature: 8a477f597d28d172789f06886806bc55\n"
         "# This file marks an npucache compile cache directory (see https://bford.info/cachedir/).\n";
}

std::string store_json(const std::string& id) {
  return std::string("{\"format\": \"") + names::kFormatName + "\", \"format_version\": \"" + names::kFormatVersion +
         "\", \"store_id\": \"" + id + "\"}\n";
}

// The id store.json names, or "" when it is damaged. A store.json of
// another format version names its store just as well (the version is
// the directory's, read for reports; entries carry their own).
std::string read_store_id(const Dir& d) {
  auto text = d.read(names::kStoreFile, 4096);
  if (!text) return "";
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || j.size() != 3 || !j.contains("format") || j["format"] != names::kFormatName ||
      !j.contains("format_version") || !j["format_version"].is_string() || !j.contains("store_id") ||
      !j["store_id"].is_string())
    return "";
  const std::string id = j["store_id"].get<std::string>();
  const std::string version = j["format_version"].get<std::string>();
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (id.size() != 32 || !std::all_of(id.begin(), id.end(), hex) || version.empty() || version.size() > 16 ||
      !std::all_of(version.begin(), version.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }))
    return "";
  return id;
}

void write_markers(const Dir& d) {
  d.publish(names::kCacheDirTag, cachedir_tag());
  d.publish(names::kStoreFile, store_json(new_store_id()));
}

void note_format1(const Dir& d) {
  if (d.stat(names::kFormat1File) && process::Context::current().get<process::Once>().first("format 1"))
    log::warn(
        "{} holds a cache of format 1 ({}), which this version (format {}) does not read; `npucache clear {}` "
        "removes it",
        d.path().string(), names::kFormat1File, names::kFormatVersion, d.path().string());
}

}  // namespace

namespace {

// The stores this process wrote the markers of, by path: a job writes them
// once per store (a service of the process context). Every open checks the
// path as a fresh process would (Dir::open: its parents' links, its own
// link, owner and mode): the directory may have been removed, replaced,
// chmod-ed, given away or replaced by a link since this process last
// opened it, and a stat of the path alone follows links someone else may
// have planted. The markers are written again when the path names another
// directory than the one they were written in (kept open, so its inode is
// not reused while it is remembered).
struct MarkedStores {
  struct Marked {
    Dir dir;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  std::mutex mu;
  std::map<std::string, Marked> by_path;
};

}  // namespace

Store Store::open(const fs::path& dir, Create create) {
  Dir d = Dir::open(dir, Safety::cache, create);
  if (create == Create::no) return Store(std::move(d));
  struct stat st {};
  if (process::Context::current().env().fstat(d.fd(), &st) != 0)
    throw CacheError("cannot inspect " + d.path().string());
  const std::string key = fs::absolute(dir).lexically_normal().string();
  MarkedStores& marked = process::Context::current().get<MarkedStores>();
  {
    std::lock_guard lock(marked.mu);
    const auto it = marked.by_path.find(key);
    if (it != marked.by_path.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino)
      return Store(std::move(d));
  }
  write_markers(d);
  note_format1(d);
  std::lock_guard lock(marked.mu);
  marked.by_path.insert_or_assign(key, MarkedStores::Marked{d, st.st_dev, st.st_ino});
  return Store(std::move(d));
}

Dir Store::objects(Create create) const { return dir_.sub(names::kObjectsDir, create); }

std::string Store::check_markers() const {
  std::string problems;
  auto tag = dir_.read(names::kCacheDirTag, 4096);
  if (tag && *tag != cachedir_tag()) problems += std::string(names::kCacheDirTag) + " is damaged; ";
  if (dir_.stat(names::kStoreFile) && read_store_id(dir_).empty())
    problems += std::string(names::kStoreFile) + " is damaged; ";
  return problems;
}

void Store::heal_markers() const {
  if (check_markers().empty()) return;
  FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(names::kStoreLock);
  auto tag = dir_.read(names::kCacheDirTag, 4096);
  if (tag && *tag != cachedir_tag()) dir_.write(names::kCacheDirTag, cachedir_tag());
  if (dir_.stat(names::kStoreFile) && read_store_id(dir_).empty()) {
    log::warn("{}/{} is damaged; the store gets a new id", dir_.path().string(), names::kStoreFile);
    dir_.write(names::kStoreFile, store_json(new_store_id()));
  }
}

std::string Store::identity() const {
  std::string id = read_store_id(dir_);
  if (id.empty()) {
    heal_markers();
    id = read_store_id(dir_);
  }
  if (id.size() != 32)
    throw CacheError(dir_.path().string() + "/" + names::kStoreFile + " is damaged: it names no store");
  struct stat st;
  if (process::Context::current().env().fstat(dir_.fd(), &st) != 0)
    throw CacheError("cannot inspect " + dir_.path().string());
  return id + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

fs::path Store::object_path(const std::string& key) const {
  return dir_.path() / names::kObjectsDir / names::object_file(key);
}
fs::path Store::index_path(const std::string& model_info) const { return dir_.path() / names::index_file(model_info); }

std::optional<DecodedIndex> Store::index(const std::string& model_info) const {
  const std::string name = names::index_file(model_info);
  const std::string key = (dir_.path() / name).string();
  auto seen = dir_.stat(name);
  if (!seen) return std::nullopt;
  {
    IndexCache& cache = index_cache();
    std::lock_guard lock(cache.mu);
    auto it = cache.by_path.find(key);
    if (it != cache.by_path.end() && it->second.seen.ino == seen->ino && it->second.seen.mtime_ns == seen->mtime_ns &&
        it->second.seen.size == seen->size)
      return it->second.decoded;
  }
  auto bytes = dir_.read(name, kMaxIndexBytes);
  if (!bytes) return std::nullopt;
  DecodedIndex d = decode_index(*bytes, "index " + key);
  if (d.index.model_info != model_info) throw CacheError("index " + key + " names model " + d.index.model_info);
  IndexCache& cache = index_cache();
  std::lock_guard lock(cache.mu);
  cache.by_path[key] = {*seen, d};
  return d;
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
  auto bytes = objects(Create::no).read(names::object_file(key), kMaxObjectBytes);
  if (!bytes) throw CacheError(what + " is missing");
  std::string stored_key;
  ObjectMeta m = cache::object_meta(*bytes, what, &stored_key);
  if (stored_key != key) throw CacheError(what + " holds object " + stored_key);
  return m;
}

FileLock Store::writing() const { return dir_.sub(names::kLocksDir, Create::yes).lock(names::kSweepLock, true); }
FileLock Store::sweeping() const { return dir_.sub(names::kLocksDir, Create::yes).lock(names::kSweepLock); }

Store::Put Store::put_object(const ObjectRecord& o, const Check& usable) const {
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
      FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(names::kRepairLock);
      remove_object(o.graph_key, seen);
    }
  }
  throw CacheError("could not store object " + o.graph_key + ": another process keeps replacing it");
}

Store::Committed Store::commit(Commit c, const Check& usable) const {
  Committed out;
  const FileLock writing_lock = writing();
  for (const auto& o : c.objects) {
    if (out.kept.count(o.graph_key)) continue;  // one object per key in a commit
    Put p = put_object(o, usable);
    if (p.adopted) out.adopted.insert(o.graph_key);
    out.kept.emplace(o.graph_key, std::move(p.stored));
  }
  std::map<std::string, std::vector<EntryRecord>> by_model;
  for (auto& e : c.entries) {
    if (const auto it = out.kept.find(e.graph_key); it != out.kept.end()) {
      e.object_checksum = it->second.meta.checksum;
      e.with_program = it->second.meta.with_program;  // what the kept bytes hold
    }
    by_model[names::model_info_of(e.path)].push_back(e);
  }
  for (const auto& [model_info, es] : by_model)
    update_index(model_info, model_components(es.front().meta.components), es, {});
  out.entries = std::move(c.entries);
  return out;
}

void Store::remove_object(const std::string& key, const std::optional<Dir::Info>& only_if) const {
  if (!dir_.stat(names::kObjectsDir)) return;
  const Dir obj = objects(Create::no);
  const std::string name = names::object_file(key);
  if (only_if) {
    auto now = obj.stat(name);
    if (!now || now->ino != only_if->ino) return;  // already replaced by another writer
  }
  obj.remove(name);
}

std::size_t Store::update_index(const std::string& model_info, const Components& model,
                                const std::vector<EntryRecord>& put, const std::vector<std::string>& remove) const {
  FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(model_info + ".lock");
  IndexFile ix;
  ix.model_info = model_info;
  ix.model = model;
  std::size_t lost = 0;
  std::map<std::string, EntryRecord> entries;
  try {
    if (auto d = index(model_info)) {
      for (auto& e : d->index.entries) entries[e.path] = std::move(e);
      if (!d->intact) {
        lost = d->damaged;
        log::warn("index {} is damaged: {} record(s) unreadable; its {} readable entries are kept in a new index",
                  index_path(model_info).string(), d->damaged, entries.size());
      }
    }
  } catch (const CacheRefused&) {
    throw;
  } catch (const IoError&) {
    throw;  // unread, not damaged: replacing it would lose its entries
  } catch (const CacheError& e) {
    log::warn("{}; writing a new index", e.what());
    lost = 1;
  }
  for (const auto& p : remove) entries.erase(p);
  for (const auto& e : put) {
    if (names::model_info_of(e.path) != model_info)
      throw CacheError("entry " + e.path + " is not an entry of model " + model_info);
    entries[e.path] = e;
  }
  for (auto& [p, e] : entries) ix.entries.push_back(std::move(e));
  const std::string name = names::index_file(model_info);
  if (ix.entries.empty()) {
    dir_.remove(name);
  } else {
    dir_.write(name, encode_index(ix));
  }
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

void Store::remove_index(const std::string& model_info) const {
  FileLock lock = dir_.sub(names::kLocksDir, Create::yes).lock(model_info + ".lock");
  dir_.remove(names::index_file(model_info));
}

}  // namespace npucache::cache
