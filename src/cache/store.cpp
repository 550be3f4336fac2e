#include "cache/store.h"

#include "cache/cache_error.h"
#include "cache/file_lock.h"
#include "cache/h5.h"
#include "log/log.h"

#include <xxhash.h>

#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace npucache::cache {
namespace fs = std::filesystem;
namespace {

const char* kObjects = "/objects";
const char* kModule = "compiled_module";
const char* kFormatVersion = "1";

void fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
  if (fd < 0) throw CacheError("cannot open " + p.string() + " to sync it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) throw CacheError("fsync of " + p.string() + " failed: " + std::strerror(e));
}

std::string tmp_name() {
  static std::atomic<int> n{0};
  return ".cache.h5.tmp." + std::to_string(::getpid()) + "." + std::to_string(n++);
}

// Is the process with this pid gone (its temporary files are garbage)?
bool dead(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

void remove_stale_temps(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".cache.h5.tmp.", 0) != 0) continue;
    long pid = std::strtol(name.c_str() + std::strlen(".cache.h5.tmp."), nullptr, 10);
    if (pid == ::getpid() || dead(pid)) fs::remove(e.path(), ec);
  }
}

void write_object(hid_t file, const ObjectRecord& o) {
  const std::string g = std::string(kObjects) + "/" + o.graph_key;
  h5::Handle grp = h5::create_group(file, g);
  h5::write_bytes(grp.id(), kModule, o.raw);
  h5::write_strings(grp.id(), "graph", o.graph_text);
  h5::Handle ds(h5::check(H5Dopen2(grp.id(), kModule, H5P_DEFAULT), "opening " + g), H5Dclose);
  auto attrs = o.attrs;
  attrs["graph_key"] = o.graph_key;
  attrs["checksum"] = checksum(o.raw);
  attrs["raw_size"] = std::to_string(o.raw.size());
  attrs["stored_size"] = std::to_string(h5::storage_size(grp.id(), kModule));
  for (const auto& [k, v] : attrs) h5::write_attr(ds.id(), k, v);
}

void write_entry(hid_t file, const EntryRecord& e) {
  const std::string p = h5_path(e.path);
  if (h5::exists(file, p)) h5::remove(file, p);
  h5::Handle grp = h5::create_group(file, p);
  for (const auto& [k, v] : e.attrs) h5::write_attr(grp.id(), k, v);
  h5::write_attr(grp.id(), "graph_key", e.graph_key);
  h5::write_strings(grp.id(), "parameters", e.parameters);
  h5::hard_link(file, std::string(kObjects) + "/" + e.graph_key + "/" + kModule, p + "/" + kModule);
}

// Entry groups: groups holding a compiled_module link, outside /objects.
void find_entries(hid_t file, const std::string& at, std::vector<std::string>& out) {
  for (const auto& c : h5::children(file, at.empty() ? "/" : at)) {
    const std::string p = at + "/" + c;
    if (p == kObjects || !h5::is_group(file, p)) continue;
    if (h5::exists(file, p + "/" + kModule))
      out.push_back(p.substr(1));
    else
      find_entries(file, p, out);
  }
}

}  // namespace

std::string checksum(const std::string& bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

std::string h5_path(const std::string& entry_path) {
  return entry_path.empty() || entry_path[0] != '/' ? "/" + entry_path : entry_path;
}

Hdf5Store::Hdf5Store(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) throw CacheError("cannot create cache directory " + dir_.string() + ": " + ec.message());
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  if (!fs::is_directory(dir_, ec))
    throw CacheError("cache directory " + dir_.string() + " is not a directory");
}

bool Hdf5Store::exists() const {
  struct stat st;
  return ::lstat(file().c_str(), &st) == 0;
}

void Hdf5Store::check_file_safety() const {
  struct stat st;
  if (::lstat(file().c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode))
    throw CacheError("refusing to use " + file().string() +
                     ": it is a symbolic link, and a link could make npucache load a file someone else "
                     "controls; replace it with the real file or use another cache_dir");
  if (st.st_uid != ::geteuid())
    throw CacheError("refusing to use " + file().string() + ": it is owned by uid " + std::to_string(st.st_uid) +
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
  const std::string p = h5_path(path);
  if (!h5::exists(f, p + "/" + kModule)) return std::nullopt;
  h5::Handle grp = h5::open_group(f, p);
  EntryRecord e;
  e.path = p.substr(1);
  for (const auto& name : h5::attr_names(grp.id())) e.attrs[name] = h5::read_attr(grp.id(), name);
  e.graph_key = e.attrs["graph_key"];
  e.attrs.erase("graph_key");
  e.parameters = h5::read_strings(grp.id(), "parameters");
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
  return h5::exists(impl_->file.id(), std::string(kObjects) + "/" + key + "/" + kModule);
}

std::vector<std::string> Hdf5Store::Reader::objects() const {
  if (!h5::exists(impl_->file.id(), kObjects)) return {};
  return h5::children(impl_->file.id(), kObjects);
}

std::size_t Hdf5Store::Reader::stored_bytes(const std::string& key) const {
  h5::Handle grp = h5::open_group(impl_->file.id(), std::string(kObjects) + "/" + key);
  return h5::storage_size(grp.id(), kModule);
}

ObjectRecord Hdf5Store::Reader::object(const std::string& key, bool with_text) const {
  const std::string g = std::string(kObjects) + "/" + key;
  if (!h5::exists(impl_->file.id(), g + "/" + kModule)) throw CacheError("object " + key + " is missing from the store");
  h5::Handle grp = h5::open_group(impl_->file.id(), g);
  ObjectRecord o;
  o.graph_key = key;
  o.raw = h5::read_bytes(grp.id(), kModule);
  h5::Handle ds(h5::check(H5Dopen2(grp.id(), kModule, H5P_DEFAULT), "opening " + g), H5Dclose);
  for (const auto& name : h5::attr_names(ds.id())) o.attrs[name] = h5::read_attr(ds.id(), name);
  if (checksum(o.raw) != o.attrs["checksum"])
    throw CacheError("object " + key + " fails its checksum (stored " + o.attrs["checksum"] + ", read " +
                     checksum(o.raw) + "): the file is corrupt");
  if (with_text) o.graph_text = h5::read_strings(grp.id(), "graph");
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
  FileLock lock((dir_ / ".lock").string());
  check_file_safety();
  remove_stale_temps(dir_);
  const fs::path tmp = dir_ / tmp_name();
  try {
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
      h5::Handle f = h5::create_file(tmp.string());
      h5::write_attr(f.id(), "format_version", kFormatVersion);
      h5::write_attr(f.id(), "producer", "npucache");
      f.close();
    }
    ::chmod(tmp.c_str(), 0600);
    h5::Handle f = h5::open_file(tmp.string(), true);
    if (readable && t.drop_unreferenced_objects) {
      // Copy the referenced objects and surviving entries into a fresh file.
      auto r = reader();
      std::set<std::string> removed(t.remove_entries.begin(), t.remove_entries.end());
      for (auto& e : r->entries())
        if (!removed.count(e.path)) {
          if (!h5::exists(f.id(), std::string(kObjects) + "/" + e.graph_key)) write_object(f.id(), r->object(e.graph_key));
          write_entry(f.id(), e);
        }
    }
    for (const auto& o : t.objects)
      if (!h5::exists(f.id(), std::string(kObjects) + "/" + o.graph_key)) write_object(f.id(), o);
    for (const auto& p : t.remove_entries)
      if (h5::exists(f.id(), h5_path(p))) h5::remove(f.id(), h5_path(p));
    for (const auto& e : t.entries) {
      if (!h5::exists(f.id(), std::string(kObjects) + "/" + e.graph_key + "/" + kModule))
        throw CacheError("entry " + e.path + " refers to object " + e.graph_key + ", which the store does not hold");
      write_entry(f.id(), e);
    }
    h5::check(H5Fflush(f.id(), H5F_SCOPE_GLOBAL), "flushing " + tmp.string());
    f.close();
    fsync_path(tmp, false);
    fs::rename(tmp, file());
    fsync_path(dir_, true);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

void Hdf5Store::clear() {
  FileLock lock((dir_ / ".lock").string());
  std::error_code ec;
  fs::remove(file(), ec);
  remove_stale_temps(dir_);
}

}  // namespace npucache::cache
