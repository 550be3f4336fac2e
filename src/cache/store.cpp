#include "cache/store.h"

#include "cache/atomic_file.h"
#include "cache/cache_error.h"
#include "cache/file_lock.h"
#include "cache/h5.h"
#include "cache/keys.h"
#include "cache/layout.h"
#include "log/log.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace npucache::cache {
namespace fs = std::filesystem;
namespace {

// --- Attribute conversion (format 1: every value a string) -----------------

using Attrs = std::map<std::string, std::string>;

std::string get(const Attrs& a, const char* k) {
  auto it = a.find(k);
  return it == a.end() ? std::string() : it->second;
}

// Strict number parsing: a damaged attribute is a CacheError, never an
// uncaught exception or a silently wrong value.
long long parse_int(const Attrs& a, const char* k, const std::string& where) {
  const std::string s = get(a, k);
  if (s.empty()) return 0;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0) throw CacheError(where + ": attribute " + k + " is damaged ('" + s + "')");
  return v;
}

double parse_double(const Attrs& a, const char* k, const std::string& where) {
  const std::string s = get(a, k);
  if (s.empty()) return 0;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || errno != 0) throw CacheError(where + ": attribute " + k + " is damaged ('" + s + "')");
  return v;
}

void put_object_facts(Attrs& a, const ObjectMeta& m) {
  a["checksum"] = m.checksum;
  a["raw_size"] = std::to_string(m.raw_size);
  a["stored_size"] = std::to_string(m.stored_size);
  a["with_program"] = m.with_program ? "true" : "false";
  a["compile_time_s"] = std::to_string(m.compile_time_s);
  a["pass_times"] = m.pass_times;
  a["producer_host"] = m.producer.host;
  a["producer_pid"] = std::to_string(m.producer.pid);
  a["producer_rank"] = std::to_string(m.producer.global_rank);
}

void get_object_facts(const Attrs& a, ObjectMeta& m, const std::string& where) {
  m.checksum = get(a, "checksum");
  m.raw_size = static_cast<uint64_t>(parse_int(a, "raw_size", where));
  m.stored_size = static_cast<uint64_t>(parse_int(a, "stored_size", where));
  m.with_program = get(a, "with_program") == "true";
  m.compile_time_s = parse_double(a, "compile_time_s", where);
  m.pass_times = get(a, "pass_times");
  m.producer.host = get(a, "producer_host");
  m.producer.pid = static_cast<long>(parse_int(a, "producer_pid", where));
  m.producer.global_rank = static_cast<int>(parse_int(a, "producer_rank", where));
}

Attrs object_attrs(const ObjectRecord& o) {
  Attrs a;
  put_object_facts(a, o.meta);
  a["graph_key"] = o.graph_key;
  a["mode"] = o.meta.mode;
  a["dynamic"] = o.meta.dynamic ? "true" : "false";
  a["canonical_hash"] = o.meta.canonical_hash;
  a["date"] = o.meta.date;
  a["version"] = o.meta.version;
  return a;
}

ObjectMeta object_meta(const Attrs& a, const std::string& where) {
  ObjectMeta m;
  get_object_facts(a, m, where);
  m.mode = get(a, "mode");
  m.dynamic = get(a, "dynamic") != "false";
  m.canonical_hash = get(a, "canonical_hash");
  m.date = get(a, "date");
  m.version = get(a, "version");
  return m;
}

Attrs entry_attrs(const EntryRecord& e) {
  Attrs a = e.meta.components;
  put_object_facts(a, e.object);
  a["name"] = e.meta.name;
  a["date"] = e.meta.date;
  a["version"] = e.meta.version;
  a["fx"] = e.meta.fx;
  a["lookup_key"] = e.meta.lookup_key;
  a["model_info"] = e.meta.model_info;
  a["world_size"] = std::to_string(e.meta.rank.world_size);
  a["global_rank"] = std::to_string(e.meta.rank.global_rank);
  a["tp_rank"] = std::to_string(e.meta.rank.tp_rank);
  a["pp_rank"] = std::to_string(e.meta.rank.pp_rank);
  a["graph_key"] = e.graph_key;
  return a;
}

EntryRecord entry_record(const std::string& path, const Attrs& a) {
  EntryRecord e;
  e.path = path;
  e.graph_key = get(a, "graph_key");
  e.meta.name = get(a, "name");
  e.meta.date = get(a, "date");
  e.meta.version = get(a, "version");
  e.meta.fx = get(a, "fx");
  e.meta.lookup_key = get(a, "lookup_key");
  e.meta.model_info = get(a, "model_info");
  e.meta.components = key_components(a);
  e.meta.rank.world_size = static_cast<int>(parse_int(a, "world_size", path));
  e.meta.rank.global_rank = static_cast<int>(parse_int(a, "global_rank", path));
  e.meta.rank.tp_rank = static_cast<int>(parse_int(a, "tp_rank", path));
  e.meta.rank.pp_rank = static_cast<int>(parse_int(a, "pp_rank", path));
  get_object_facts(a, e.object, path);
  return e;
}

Attrs read_attrs(hid_t obj) {
  Attrs a;
  for (const auto& name : h5::attr_names(obj)) a[name] = h5::read_attr(obj, name);
  return a;
}

// --- File layout ------------------------------------------------------------

std::string module_path(const std::string& graph_key) {
  return layout::h5_object(graph_key) + "/" + layout::kModuleDataset;
}

// Is the process with this pid gone (its temporary files are garbage)?
bool dead(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

void remove_stale_temps(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const long pid = layout::temp_owner(e.path().filename().string(), layout::kCacheFile);
    if (pid == ::getpid() || dead(pid)) fs::remove(e.path(), ec);
  }
}

void write_object(hid_t file, const ObjectRecord& o) {
  h5::Handle grp = h5::create_group(file, layout::h5_object(o.graph_key));
  h5::write_bytes(grp.id(), layout::kModuleDataset, o.raw);
  h5::write_strings(grp.id(), layout::kGraphDataset, o.graph_text);
  h5::Handle ds = h5::open_dataset(grp.id(), layout::kModuleDataset);
  ObjectRecord stored = o;
  stored.meta.checksum = checksum(o.raw);
  stored.meta.raw_size = o.raw.size();
  stored.meta.stored_size = h5::storage_size(grp.id(), layout::kModuleDataset);
  for (const auto& [k, v] : object_attrs(stored)) h5::write_attr(ds.id(), k, v);
}

void write_entry(hid_t file, const EntryRecord& e) {
  const std::string p = layout::h5_entry(e.path);
  if (h5::exists(file, p)) h5::remove(file, p);
  h5::Handle grp = h5::create_group(file, p);
  for (const auto& [k, v] : entry_attrs(e)) h5::write_attr(grp.id(), k, v);
  h5::write_strings(grp.id(), layout::kParametersDataset, e.parameters);
  h5::hard_link(file, module_path(e.graph_key), p + "/" + layout::kModuleDataset);
}

// Entry groups: groups holding a compiled_module link, outside /objects.
void find_entries(hid_t file, const std::string& at, std::vector<std::string>& out) {
  for (const auto& c : h5::children(file, at.empty() ? "/" : at)) {
    const std::string p = at + "/" + c;
    if (p == layout::kObjectsGroup || !h5::is_group(file, p)) continue;
    if (h5::exists(file, p + "/" + layout::kModuleDataset))
      out.push_back(p.substr(1));
    else
      find_entries(file, p, out);
  }
}

}  // namespace

Hdf5Store::Hdf5Store(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) throw CacheError("cannot create cache directory " + dir_.string() + ": " + ec.message());
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  if (!fs::is_directory(dir_, ec)) throw CacheError("cache directory " + dir_.string() + " is not a directory");
}

fs::path Hdf5Store::file() const { return dir_ / layout::kCacheFile; }

bool Hdf5Store::exists() const {
  struct stat st;
  return ::lstat(file().c_str(), &st) == 0;
}

void Hdf5Store::check_file_safety() const {
  struct stat st;
  if (::lstat(file().c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode))
    throw CacheRefused("refusing to use " + file().string() +
                       ": it is a symbolic link, and a link could make npucache load a file someone else "
                       "controls; replace it with the real file or use another cache_dir");
  if (st.st_uid != ::geteuid())
    throw CacheRefused("refusing to use " + file().string() + ": it is owned by uid " + std::to_string(st.st_uid) +
                       ", not by the current user (uid " + std::to_string(::geteuid()) +
                       "); a cache written by another user could make this process run code it did not "
                       "compile. Use your own cache_dir");
}

struct Hdf5Store::Reader::Impl {
  h5::Handle file;
};

Hdf5Store::Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Hdf5Store::Reader::~Reader() = default;
Hdf5Store::Reader::Reader(Reader&&) noexcept = default;

std::optional<Hdf5Store::Reader> Hdf5Store::reader() const {
  check_file_safety();
  if (!exists()) return std::nullopt;
  auto impl = std::make_unique<Reader::Impl>();
  impl->file = h5::open_file(file().string(), false);
  return Reader(std::move(impl));
}

std::optional<EntryRecord> Hdf5Store::Reader::entry(const std::string& path) const {
  const hid_t f = impl_->file.id();
  const std::string p = layout::h5_entry(path);
  if (!h5::exists(f, p + "/" + layout::kModuleDataset)) return std::nullopt;
  h5::Handle grp = h5::open_group(f, p);
  EntryRecord e = entry_record(p.substr(1), read_attrs(grp.id()));
  e.parameters = h5::read_strings(grp.id(), layout::kParametersDataset);
  if (e.parameters.size() == 1 && e.parameters[0].empty()) e.parameters.clear();
  return e;
}

std::vector<EntryRecord> Hdf5Store::Reader::entries() const {
  std::vector<std::string> paths;
  find_entries(impl_->file.id(), "", paths);
  std::vector<EntryRecord> out;
  for (const auto& p : paths)
    if (auto e = entry(p)) out.push_back(std::move(*e));
  return out;
}

bool Hdf5Store::Reader::has_object(const std::string& key) const {
  return h5::exists(impl_->file.id(), module_path(key));
}

std::vector<std::string> Hdf5Store::Reader::objects() const {
  if (!h5::exists(impl_->file.id(), layout::kObjectsGroup)) return {};
  return h5::children(impl_->file.id(), layout::kObjectsGroup);
}

std::size_t Hdf5Store::Reader::stored_bytes(const std::string& key) const {
  h5::Handle grp = h5::open_group(impl_->file.id(), layout::h5_object(key));
  return h5::storage_size(grp.id(), layout::kModuleDataset);
}

ObjectRecord Hdf5Store::Reader::object(const std::string& key, bool with_text) const {
  const std::string g = layout::h5_object(key);
  if (!h5::exists(impl_->file.id(), module_path(key))) throw CacheError("object " + key + " is missing from the store");
  h5::Handle grp = h5::open_group(impl_->file.id(), g);
  ObjectRecord o;
  o.graph_key = key;
  o.raw = h5::read_bytes(grp.id(), layout::kModuleDataset);
  h5::Handle ds = h5::open_dataset(grp.id(), layout::kModuleDataset);
  o.meta = object_meta(read_attrs(ds.id()), "object " + key);
  if (checksum(o.raw) != o.meta.checksum)
    throw CacheError("object " + key + " fails its checksum (stored " + o.meta.checksum + ", read " +
                     checksum(o.raw) + "): the file is corrupt");
  if (with_text) o.graph_text = h5::read_strings(grp.id(), layout::kGraphDataset);
  return o;
}

std::shared_ptr<const Hdf5Store::Reader> Hdf5Store::shared_reader() const {
  struct Cached {
    ino_t ino;
    int64_t mtime_ns;
    std::shared_ptr<const Reader> reader;
  };
  static std::mutex mu;
  // Never destroyed: HDF5 closes its open files itself at exit, after which
  // closing them again would fail.
  static auto& cache = *new std::map<std::string, Cached>();
  check_file_safety();
  struct stat st;
  if (::stat(file().c_str(), &st) != 0) return nullptr;
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  std::lock_guard lock(mu);
  auto it = cache.find(file().string());
  if (it != cache.end() && it->second.ino == st.st_ino && it->second.mtime_ns == mtime) return it->second.reader;
  auto r = reader();
  if (!r) return nullptr;
  auto shared = std::make_shared<const Reader>(std::move(*r));
  cache[file().string()] = {st.st_ino, mtime, shared};
  return shared;
}

void Hdf5Store::commit(const Transaction& t) {
  FileLock lock((dir_ / layout::kLockFile).string());
  check_file_safety();
  remove_stale_temps(dir_);
  AtomicFile out(file());
  const std::string tmp = out.temp_path().string();
  bool readable = exists();
  if (readable) {
    try {
      h5::open_file(file().string(), false);
    } catch (const CacheError& e) {
      log::warn("cache file {} is unreadable ({}); starting a new one", file().string(), e.what());
      readable = false;
    }
  }
  if (readable && !t.drop_unreferenced_objects) {
    fs::copy_file(file(), tmp, fs::copy_options::overwrite_existing);
  } else {
    h5::Handle f = h5::create_file(tmp);
    h5::write_attr(f.id(), "format_version", layout::kFormatVersion);
    h5::write_attr(f.id(), "producer", layout::kProducer);
    f.close();
  }
  h5::Handle f = h5::open_file(tmp, true);
  if (readable && t.drop_unreferenced_objects) {
    // Copy the referenced objects and surviving entries into a fresh file.
    auto r = reader();
    std::set<std::string> removed(t.remove_entries.begin(), t.remove_entries.end());
    for (auto& e : r->entries())
      if (!removed.count(e.path)) {
        if (!h5::exists(f.id(), layout::h5_object(e.graph_key))) write_object(f.id(), r->object(e.graph_key));
        write_entry(f.id(), e);
      }
  }
  for (const auto& o : t.objects)
    if (!h5::exists(f.id(), layout::h5_object(o.graph_key))) write_object(f.id(), o);
  for (const auto& p : t.remove_entries)
    if (h5::exists(f.id(), layout::h5_entry(p))) h5::remove(f.id(), layout::h5_entry(p));
  for (const auto& e : t.entries) {
    if (!h5::exists(f.id(), module_path(e.graph_key)))
      throw CacheError("entry " + e.path + " refers to object " + e.graph_key + ", which the store does not hold");
    write_entry(f.id(), e);
  }
  h5::flush(f.id());
  f.close();
  out.commit();
}

void Hdf5Store::clear() {
  FileLock lock((dir_ / layout::kLockFile).string());
  std::error_code ec;
  fs::remove(file(), ec);
  remove_stale_temps(dir_);
}

}  // namespace npucache::cache
