// The uses files of running processes (storage/live_uses.h).
#include "storage/live_uses.h"

#include "format/names.h"
#include "log/log.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "process/env.h"
#include "storage/dir.h"
#include "storage/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>

namespace npucache::storage {
namespace {

constexpr const char* kPrefix = "uses.";
constexpr const char* kSuffix = ".lock";

bool is_uses_file(const std::string& n) {
  return n.size() > 10 && n.compare(0, 5, kPrefix) == 0 && n.compare(n.size() - 5, 5, kSuffix) == 0;
}

// A host name as a file name's part: what is not [A-Za-z0-9-] becomes '_'.
std::string name_part(const std::string& text) {
  std::string out;
  for (const char c : text.substr(0, 64)) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  return out.empty() ? "host" : out;
}

// One directory's file: its lock held, an append descriptor, the entries
// written to it.
struct UsesFile {
  Dir locks;
  std::string name;
  FileLock lock;
  int fd = -1;
  std::set<std::string> written;
};

// A service of the process context: the files this process holds, removed
// when it ends (its context's last flush, at exit for the program's: a
// killed process leaves its own, for a sweep).
class Uses {
 public:
  explicit Uses(process::Context& c) : ctx_(c), env_(c.env()) {
    c.on_flush([this] {
      if (ctx_.ending()) release();
    });
  }
  ~Uses() { release(); }

  void release() {
    std::lock_guard lock(mu_);
    ended_ = true;
    for (auto& [dir, f] : files_) {
      if (!f) continue;
      try {
        if (f->fd >= 0) env_.close(f->fd);
        f->fd = -1;
        (void)f->locks.remove_lock(f->name, f->lock);
      } catch (const std::exception& e) {
        log::debug("uses file {} in {} not removed: {}", f->name, dir, e.what());
      }
    }
    files_.clear();
  }

  void note(const Store& s, const std::vector<std::string>& entries) {
    const std::string dir = s.dir().string();
    std::lock_guard lock(mu_);
    if (ended_) return;  // the process is ending: its files are gone
    auto& f = files_[dir];
    if (!f) f = open(s);  // a failure leaves an empty slot: tried again on the next use
    if (!f) return;
    for (const auto& entry : entries) {
      if (entry.find('\n') != std::string::npos || !f->written.insert(entry).second) continue;
      const std::string line = entry + "\n";
      if (env_.write(f->fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        f->written.erase(entry);
        failed(dir,
               IoError("writing " + (f->locks.path() / f->name).string() + " failed: " + std::strerror(errno), errno));
        return;
      }
    }
  }

 private:
  std::unique_ptr<UsesFile> open(const Store& s) {
    try {
      Dir locks = s.directory().sub(names::kLocksDir, Create::yes);
      const process::Identity id = process::Context::current().identity();
      std::random_device rd;
      char tail[24];
      std::snprintf(tail, sizeof tail, "%08x%08x", rd(), rd());
      const std::string name =
          std::string(kPrefix) + name_part(id.host) + "." + std::to_string(id.pid) + "." + tail + kSuffix;
      FileLock held = locks.lock(name);
      const int fd = env_.openat(locks.fd(), name.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) throw IoError("cannot open " + (locks.path() / name).string() + ": " + std::strerror(errno), errno);
      struct stat st {};
      if (env_.fstat(fd, &st) != 0 || st.st_ino != held.inode()) {
        env_.close(fd);
        throw CacheError("the uses file " + (locks.path() / name).string() + " was replaced");
      }
      return std::make_unique<UsesFile>(UsesFile{std::move(locks), name, std::move(held), fd, {}});
    } catch (const IoError& e) {
      failed(s.dir().string(), e);
    } catch (const std::exception& e) {
      log::debug("uses of {} not recorded: {}", s.dir().string(), e.what());
    }
    return nullptr;
  }

  // A file system that fails is said once per store; the rest is debug.
  void failed(const std::string& dir, const IoError& e) {
    if (e.storage_failed() && warned_.insert(dir).second)
      log::warn("the entries this process uses in {} are not recorded for gc ({}); a gc beside it may evict them", dir,
                e.what());
    else
      log::debug("uses of {} not recorded: {}", dir, e.what());
  }

  process::Context& ctx_;
  process::Env& env_;
  std::mutex mu_;
  bool ended_ = false;
  std::map<std::string, std::unique_ptr<UsesFile>> files_;
  std::set<std::string> warned_;
};

}  // namespace

void note_live_use(const Store& s, const std::vector<std::string>& entries) {
  if (process::dry_run() || entries.empty()) return;
  process::Context::current().get<Uses>().note(s, entries);
}

LiveUses live_uses(const Store& s, const Sweeping* held) {
  LiveUses out;
  const Dir& d = s.directory();
  if (!d.stat(names::kLocksDir)) return out;
  const Dir locks = d.sub(names::kLocksDir, Create::no);
  bool warned = false;
  for (const auto& n : locks.list()) {
    if (!is_uses_file(n)) continue;
    try {
      std::optional<FileLock> free = locks.lock_within(n, false, 0.0);
      if (free) {  // its process is gone (every one past the bound too)
        if (held && locks.remove_lock(n, *free)) ++out.removed;
        continue;
      }
      // Only the files of running processes count against the bound.
      if (out.processes >= kMaxUsesFiles) {
        if (!warned)
          log::warn(
              "{} holds more than {} uses files of running processes; the entries of the others are not kept "
              "as in use",
              locks.path().string(), kMaxUsesFiles);
        warned = true;
        continue;
      }
      ++out.processes;
      const auto text = locks.head(n, kMaxUsesBytes);
      if (!text) continue;
      std::size_t at = 0;
      for (std::size_t nl; (nl = text->find('\n', at)) != std::string::npos; at = nl + 1)
        if (nl > at) out.entries.insert(text->substr(at, nl - at));
    } catch (const std::exception& e) {
      log::debug("uses file {}/{} not read: {}", locks.path().string(), n, e.what());
    }
  }
  return out;
}

}  // namespace npucache::storage
