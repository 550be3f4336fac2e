// A store's markers and identity: CACHEDIR.TAG, which tells backup tools
// the directory is a cache, and store.json, whose id (with the directory's
// device and inode) is what a job groups its ranks' stores by. Written
// once per store per process, checked and healed by the admin commands.
#include "format/names.h"
#include "log/log.h"
#include "process/context.h"
#include "process/once.h"
#include "storage/store.h"

#include <npucache/error.h>

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace npucache::storage {
namespace fs = std::filesystem;
namespace {
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

void Store::mark() const {
  struct stat st {};
  if (process::Context::current().env().fstat(dir_.fd(), &st) != 0)
    throw CacheError("cannot inspect " + dir_.path().string());
  const std::string key = fs::absolute(dir_.path()).lexically_normal().string();
  MarkedStores& marked = process::Context::current().get<MarkedStores>();
  {
    std::lock_guard lock(marked.mu);
    const auto it = marked.by_path.find(key);
    if (it != marked.by_path.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino) return;
  }
  write_markers(dir_);
  note_format1(dir_);
  std::lock_guard lock(marked.mu);
  marked.by_path.insert_or_assign(key, MarkedStores::Marked{dir_, st.st_dev, st.st_ino});
}

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
    // Removed since this process marked the store (a `clear` beside a
    // running job): made again, as an open makes it (publish: of writers
    // racing here, the first one's id stands for all); damaged: healed.
    if (!dir_.stat(names::kStoreFile)) write_markers(dir_);
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

std::string Store::predicted_identity() const {
  if (::faccessat(dir_.fd(), ".", W_OK, 0) != 0)
    throw CacheError("cannot write cache directory " + dir_.path().string() + ": " + std::strerror(errno));
  const std::string id = read_store_id(dir_);
  struct stat st;
  if (process::Context::current().env().fstat(dir_.fd(), &st) != 0)
    throw CacheError("cannot inspect " + dir_.path().string());
  return (id.size() == 32 ? id : std::string("healed")) + ":" + std::to_string(st.st_dev) + ":" +
         std::to_string(st.st_ino);
}

}  // namespace npucache::storage
