#include "storage/dir.h"

#include "format/cache_error.h"
#include "format/names.h"
#include "process/context.h"
#include "process/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace npucache::storage {
namespace fs = std::filesystem;
bool IoError::storage_failed() const { return error_ == ENOSPC || error_ == EDQUOT || error_ == EIO; }

namespace {

// Every file-system call goes through the Env of the current process
// context (tests inject faults there).
process::Env& env() { return process::Context::current().env(); }

[[noreturn]] void fail(const std::string& what, const fs::path& p, int err) {
  throw IoError(what + " " + p.string() + " failed: " + std::strerror(err), err);
}

// Is the process with this pid gone in this pid namespace?
bool dead(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// A temporary without its owner lock and older than this was left by a
// writer that is gone: no write of the store takes an hour, and an hour
// covers the clock skew between a host and an NFS server.
constexpr double kAbandonedTempSeconds = 3600;

std::string mode_text(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

// `inside`: a directory inside the cache (objects/, locks/), where a
// sticky bit excuses nothing: nobody else may add files there.
void check_safe(const struct stat& st, const fs::path& p, bool inside = false) {
  if (!S_ISDIR(st.st_mode)) throw CacheRefused("refusing to use " + p.string() + ": it is not a directory");
  if (st.st_uid != ::geteuid())
    throw CacheRefused("refusing to use cache directory " + p.string() + ": it is owned by uid " +
                       std::to_string(st.st_uid) + ", not by the current user (uid " + std::to_string(::geteuid()) +
                       "); another user could make this process run code it did not compile. Use a cache_dir of "
                       "your own");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (inside || (st.st_mode & S_ISVTX) == 0))
    throw CacheRefused("refusing to use cache directory " + p.string() + ": other users can write to it (mode " +
                       mode_text(st.st_mode) + ")" + (inside ? "" : " and it has no sticky bit") +
                       ", so they could replace cache files; chmod 700 it or use another cache_dir");
}

int open_dir_at(int at, const std::string& name, const fs::path& full) {
  struct stat lst;
  if (env().fstatat(at, name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode))
    throw CacheRefused("refusing to use " + full.string() +
                       ": it is a symbolic link, and a link could make npucache read or write where someone else "
                       "chooses; use the real directory");
  const int fd = env().openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP)
    throw CacheRefused("refusing to use " + full.string() + ": it is a symbolic link; use the real directory");
  if (fd < 0 && errno == ENOTDIR) throw CacheRefused("refusing to use " + full.string() + ": it is not a directory");
  return fd;
}

}  // namespace

FileLock::FileLock(int fd, std::string what, bool shared) : fd_(fd), what_(std::move(what)) {
  while (env().flock(fd_, shared ? LOCK_SH : LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    env().close(fd_);
    fd_ = -1;
    throw IoError("cannot lock " + what_ + ": " + std::strerror(e), e);
  }
}

std::optional<FileLock> FileLock::within(int fd, std::string what, bool shared, double wait_s) {
  const double deadline = env().monotonic_s() + wait_s;
  for (double pause = 0.002;; pause = std::min(pause * 2, 0.05)) {
    if (env().flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0) {
      FileLock held;
      held.fd_ = fd;
      held.what_ = std::move(what);
      return held;
    }
    const int e = errno;
    if (e != EWOULDBLOCK && e != EINTR) {
      env().close(fd);
      throw IoError("cannot lock " + what + ": " + std::strerror(e), e);
    }
    const double left = deadline - env().monotonic_s();
    if (left <= 0) {
      env().close(fd);
      return std::nullopt;
    }
    env().sleep_s(std::min(pause, left));
  }
}

ino_t FileLock::inode() const {
  struct stat st {};
  return fd_ >= 0 && env().fstat(fd_, &st) == 0 ? st.st_ino : 0;
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    env().flock(fd_, LOCK_UN);
    env().close(fd_);
  }
}

Dir::Fd::~Fd() {
  if (fd >= 0) env().close(fd);
}

bool Dir::exists(const fs::path& path) {
  struct stat st;
  return env().fstatat(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The parents of a cache directory may be links (a home on another disk)
// but only links of the current user or root: a link someone else planted
// in a shared directory could point the cache, and what npucache writes,
// anywhere (the kernel's protected_symlinks covers sticky directories
// only, and can be off).
static void check_parents(const fs::path& p) {
  fs::path at = p.root_path();
  for (const auto& part : p.parent_path().relative_path()) {
    at /= part;
    struct stat st;
    if (env().fstatat(AT_FDCWD, at.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // missing: created below, by us
    if (S_ISLNK(st.st_mode) && st.st_uid != 0 && st.st_uid != ::geteuid())
      throw CacheRefused("refusing to use cache directory " + p.string() + ": its parent " + at.string() +
                         " is a symbolic link owned by uid " + std::to_string(st.st_uid) +
                         ", who could point it anywhere; use a path without it");
  }
}

// A cache directory given as a symbolic link (a dotfile link to a bigger
// disk, a scratch link on a cluster) is followed when the link belongs to
// the current user (or root) and resolves to a directory that passes the
// checks; the resolved path is used from then on. A link of anyone else is
// refused: it could point the cache anywhere.
static fs::path resolve_own_link(const fs::path& p) {
  struct stat lst;
  if (env().fstatat(AT_FDCWD, p.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(lst.st_mode)) return p;
  if (lst.st_uid != ::geteuid() && lst.st_uid != 0)
    throw CacheRefused("refusing to use cache directory " + p.string() + ": it is a symbolic link owned by uid " +
                       std::to_string(lst.st_uid) + ", not by the current user (uid " + std::to_string(::geteuid()) +
                       "), who could point it anywhere; use the real directory");
  std::string resolved;
  if (env().realpath(p.c_str(), resolved) != 0)
    throw CacheError("cache directory " + p.string() + " is a symbolic link whose target cannot be resolved (" +
                     std::strerror(errno) + "); create the directory it points to");
  const fs::path target = resolved;
  check_parents(target);
  return target;
}

Dir Dir::open(const fs::path& path, Safety safety, Create create) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (safety == Safety::cache) {
    check_parents(p);
    p = resolve_own_link(p);
  }
  if (create == Create::yes) {
    // Missing components are created 0700, one at a time.
    fs::path at = p.root_path();
    for (const auto& part : p.relative_path()) {
      at /= part;
      if (part.empty()) continue;
      if (env().mkdirat(AT_FDCWD, at.c_str(), 0700) != 0 && errno != EEXIST) fail("creating directory", at, errno);
    }
  }
  auto fd = std::make_shared<Fd>();
  fd->fd = open_dir_at(AT_FDCWD, p.string(), p);
  if (fd->fd < 0) {
    if (errno == ENOENT) throw CacheError("no directory " + p.string());
    fail("opening directory", p, errno);
  }
  if (safety == Safety::cache) {
    struct stat st;
    if (env().fstat(fd->fd, &st) != 0) fail("inspecting", p, errno);
    check_safe(st, p);
  }
  return Dir(std::move(fd), p, safety);
}

void Dir::check_creatable(const fs::path& path) {
  const fs::path asked = fs::absolute(path).lexically_normal();
  check_parents(asked);
  const fs::path p = resolve_own_link(asked);
  for (fs::path at = p.parent_path();; at = at.parent_path()) {
    struct stat st {};
    if (env().fstatat(AT_FDCWD, at.c_str(), &st, 0) == 0) {
      if (!S_ISDIR(st.st_mode))
        throw CacheError("cannot create cache directory " + p.string() + ": " + at.string() + " is not a directory");
      if (::access(at.c_str(), W_OK) != 0)
        throw CacheError("cannot create cache directory " + p.string() + " in " + at.string() + ": " +
                         std::strerror(errno));
      return;
    }
    if (errno != ENOENT)
      throw CacheError("cannot create cache directory " + p.string() + ": " + at.string() + ": " +
                       std::strerror(errno));
    if (at == at.root_path()) return;
  }
}

Dir Dir::sub(const std::string& name, Create create) const {
  const fs::path full = path_ / name;
  if (create == Create::yes && env().mkdirat(fd(), name.c_str(), 0700) != 0 && errno != EEXIST)
    fail("creating directory", full, errno);
  auto sfd = std::make_shared<Fd>();
  sfd->fd = open_dir_at(fd(), name, full);
  if (sfd->fd < 0) {
    if (errno == ENOENT) throw CacheError("no directory " + full.string());
    fail("opening directory", full, errno);
  }
  struct stat st;
  if (env().fstat(sfd->fd, &st) != 0) fail("inspecting", full, errno);
  if (safety_ == Safety::cache) check_safe(st, full, true);
  return Dir(std::move(sfd), full, safety_);
}

std::optional<Dir::Info> Dir::stat(const std::string& name) const {
  struct stat st;
  if (env().fstatat(fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("inspecting", path_ / name, errno);
  }
  Info i;
  i.ino = st.st_ino;
  i.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  i.size = static_cast<int64_t>(st.st_size);
  i.regular = S_ISREG(st.st_mode);
  i.ours = st.st_uid == ::geteuid();
  return i;
}

std::optional<std::string> Dir::read(const std::string& name, std::size_t cap) const {
  return read_up_to(name, cap, false);
}

std::optional<std::string> Dir::head(const std::string& name, std::size_t n) const { return read_up_to(name, n, true); }

std::optional<std::string> Dir::read_up_to(const std::string& name, std::size_t cap, bool truncate) const {
  const fs::path full = path_ / name;
  const int f = env().openat(fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (f < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP)
      throw CacheRefused("refusing to use " + full.string() +
                         ": it is a symbolic link, and a link could make npucache load a file someone else controls");
    fail("opening", full, errno);
  }
  struct Closer {
    int fd;
    ~Closer() { env().close(fd); }
  } closer{f};
  struct stat st;
  if (env().fstat(f, &st) != 0) fail("inspecting", full, errno);
  if (!S_ISREG(st.st_mode)) throw CacheRefused("refusing to use " + full.string() + ": it is not a regular file");
  if (safety_ == Safety::cache && st.st_uid != ::geteuid())
    throw CacheRefused("refusing to use " + full.string() + ": it is owned by uid " + std::to_string(st.st_uid) +
                       ", not by the current user (uid " + std::to_string(::geteuid()) + ")");
  if (safety_ == Safety::cache && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw CacheRefused("refusing to use " + full.string() + ": other users can write to it (mode " +
                       mode_text(st.st_mode) +
                       "), so its contents cannot be trusted; npucache writes its files 0600. Remove it (it is "
                       "rebuilt) or chmod 600 it");
  if (truncate && static_cast<uint64_t>(st.st_size) > cap) st.st_size = static_cast<off_t>(cap);
  if (static_cast<uint64_t>(st.st_size) > cap)
    throw CacheError(full.string() + " is " + std::to_string(st.st_size) +
                     " bytes, more than a cache file of its kind "
                     "can be (" +
                     std::to_string(cap) + "): it is damaged or not npucache's");
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = env().read(f, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("reading", full, errno);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string Dir::temp_for(const std::string& name, int& out_fd, int& owner_fd, mode_t mode) const {
  // A name someone planted (a file or a link where our next temporary would go) only costs a
  // retry: O_EXCL|O_NOFOLLOW never opens an existing entry, so the plant is never written through.
  for (int attempt = 0;; ++attempt) {
    const std::string temp = names::temp_name(name);
    out_fd = env().openat(fd(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (out_fd < 0) {
      if (errno != EEXIST || attempt >= 64) fail("creating", path_ / temp, errno);
      continue;
    }
    // The owner lock (docs/FORMAT.md, "Concurrency"): held on a
    // description of its own until the temporary is renamed, linked or
    // removed, so closing the written descriptor keeps it. A sweeper
    // removes a temporary only while it holds this lock; one that removed
    // this name before the lock was taken is seen below, and the write
    // starts again. The lock's descriptor is read-only and its calls lose
    // nothing when they fail, so they are made outside the Env (whose
    // injected faults stand for losses).
    owner_fd = ::openat(fd(), temp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int err = owner_fd < 0 ? errno : 0;
    while (!err && ::flock(owner_fd, LOCK_EX) != 0)
      if (errno != EINTR) err = errno;
    const char* what = "locking";
    bool gone = err == ENOENT;  // removed by a sweeper before the lock
    if (!err) {
      what = "inspecting";
      struct stat mine {
      }, named{};
      if (env().fstat(out_fd, &mine) != 0) {
        err = errno;
      } else if (env().fstatat(fd(), temp.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT)
          gone = true;
        else
          err = errno;
      } else {
        gone = mine.st_ino != named.st_ino || mine.st_dev != named.st_dev;
      }
      if (!err && !gone) return temp;
    }
    env().close(out_fd);
    out_fd = -1;
    if (owner_fd >= 0) ::close(owner_fd);
    owner_fd = -1;
    if (!gone) {
      env().unlinkat(fd(), temp.c_str(), 0);
      fail(what, path_ / temp, err);
    }
    if (attempt >= 64) fail("keeping a temporary of", path_ / name, ENOENT);
  }
}

void Dir::sync() const {
  if (env().fsync(fd()) != 0 && errno != EINVAL) fail("syncing directory", path_, errno);
}

namespace {

void write_all(int f, std::string_view bytes, const fs::path& p) {
  const char* at = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = env().write(f, at, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing", p, errno);
    }
    at += n;
    left -= static_cast<std::size_t>(n);
  }
  if (env().fsync(f) != 0) fail("syncing", p, errno);
}

}  // namespace

namespace {

// Closes a temporary's owner lock (after its rename, link or removal;
// outside the Env, as it was taken: Dir::temp_for).
void release(int& owner_fd) {
  if (owner_fd >= 0) ::close(owner_fd);
  owner_fd = -1;
}

}  // namespace

void Dir::write(const std::string& name, std::string_view bytes, mode_t mode) const {
  int f = -1, owner = -1;
  const std::string temp = temp_for(name, f, owner, mode);
  try {
    write_all(f, bytes, path_ / name);
    if (env().close(f) != 0) {
      f = -1;
      fail("closing", path_ / temp, errno);
    }
    f = -1;
    if (env().renameat(fd(), temp.c_str(), fd(), name.c_str()) != 0)
      fail("renaming a temporary over", path_ / name, errno);
  } catch (...) {
    if (f >= 0) env().close(f);
    env().unlinkat(fd(), temp.c_str(), 0);
    release(owner);
    throw;
  }
  release(owner);
  sync();
}

bool Dir::publish(const std::string& name, std::string_view bytes) const {
  int f = -1, owner = -1;
  const std::string temp = temp_for(name, f, owner);
  bool linked = false;
  try {
    write_all(f, bytes, path_ / name);
    const int closed = env().close(f);
    f = -1;
    if (closed != 0) fail("closing", path_ / temp, errno);
    if (env().linkat(fd(), temp.c_str(), fd(), name.c_str(), 0) == 0)
      linked = true;
    else if (errno != EEXIST)
      fail("linking", path_ / name, errno);
  } catch (...) {
    if (f >= 0) env().close(f);
    env().unlinkat(fd(), temp.c_str(), 0);
    release(owner);
    throw;
  }
  env().unlinkat(fd(), temp.c_str(), 0);
  release(owner);
  if (linked) sync();
  return linked;
}

void Dir::remove(const std::string& name) const {
  if (env().unlinkat(fd(), name.c_str(), 0) != 0 && errno != ENOENT) fail("removing", path_ / name, errno);
}

bool Dir::remove_empty_dir(const std::string& name) const {
  return env().unlinkat(fd(), name.c_str(), AT_REMOVEDIR) == 0;
}

void Dir::rename(const std::string& name, const std::string& to) const {
  if (env().renameat(fd(), name.c_str(), fd(), to.c_str()) != 0 && errno != ENOENT)
    fail("renaming", path_ / name, errno);
}

std::vector<std::string> Dir::list() const {
  std::vector<std::string> out;
  if (env().list_dir(fd(), out) != 0) fail("listing", path_, errno);
  std::sort(out.begin(), out.end());
  return out;
}

// A lock is the locked file only while `name` still refers to it: whoever
// removes a lock file (a claim's release, clear) removes the name while
// holding the lock, so a process that opened the file before the removal
// and locks it after holds a lock on a file no later process opens. It
// opens the name again (the file a newcomer made, or a new one).
namespace {
constexpr int kLockAttempts = 8;
}

// False only when `name` is known to refer to another file than the one
// `held` locks, or to none; a lock whose file cannot be inspected (fstat
// or the name's stat failing) is taken as it is.
bool Dir::names_lock(const std::string& name, const FileLock& held) const {
  const ino_t mine = held.inode();
  if (mine == 0) return true;
  try {
    const auto now = stat(name);
    return now && (now->ino == 0 || now->ino == mine);
  } catch (const IoError&) {
    return true;
  }
}

FileLock Dir::lock(const std::string& name, bool shared) const {
  for (int attempt = 0;; ++attempt) {
    const int f = env().openat(fd(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0) fail("opening lock file", path_ / name, errno);
    FileLock held(f, (path_ / name).string(), shared);
    if (names_lock(name, held)) return held;
    if (attempt + 1 >= kLockAttempts)
      throw CacheError("cannot lock " + (path_ / name).string() + ": the lock file keeps being removed or replaced");
  }
}

std::optional<FileLock> Dir::lock_within(const std::string& name, bool shared, double wait_s) const {
  const double deadline = env().monotonic_s() + wait_s;
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    const int f = env().openat(fd(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0) fail("opening lock file", path_ / name, errno);
    auto held = FileLock::within(f, (path_ / name).string(), shared, std::max(0.0, deadline - env().monotonic_s()));
    if (!held) return std::nullopt;
    if (names_lock(name, *held)) return held;
  }
  return std::nullopt;
}

bool Dir::remove_lock(const std::string& name, const FileLock& held) const {
  const ino_t mine = held.inode();
  const auto now = stat(name);
  if (!now || mine == 0 || now->ino != mine) return false;
  remove(name);
  return true;
}

std::size_t Dir::remove_stale_temps() const {
  std::size_t removed = 0;
  for (const auto& n : list()) {
    const long pid = names::temp_owner_any(n);
    if (pid <= 0 || pid == ::getpid()) continue;  // not a temporary, or one of this process's
    const int f = env().openat(fd(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) continue;
    // A writer holds its temporary's owner lock while it writes, whatever
    // its pid namespace or host: a held lock is a live writer. Without it,
    // the writer is gone when its pid is gone here, or when the temporary
    // is older than any write (a pid of another namespace or host that is
    // alive here, or a writer of an earlier version without the lock).
    struct stat st {};
    if (env().flock(f, LOCK_EX | LOCK_NB) == 0 && env().fstat(f, &st) == 0) {
      const double age = env().wall_s() - static_cast<double>(st.st_mtim.tv_sec);
      if ((dead(pid) || age > kAbandonedTempSeconds) && env().unlinkat(fd(), n.c_str(), 0) == 0) ++removed;
    }
    env().close(f);
  }
  return removed;
}

bool Dir::remove_unheld_temp(const std::string& name) const {
  // A writer's temporary is a regular file it made: anything else under
  // such a name (a link, a socket) is no one's write.
  if (const auto info = stat(name); info && !info->regular) return env().unlinkat(fd(), name.c_str(), 0) == 0;
  const int f = env().openat(fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) return false;
  bool removed = false;
  if (env().flock(f, LOCK_EX | LOCK_NB) == 0) removed = env().unlinkat(fd(), name.c_str(), 0) == 0;
  env().close(f);
  return removed;
}

void write_file_atomically(const fs::path& path, std::string_view bytes, mode_t mode) {
  const fs::path p = fs::absolute(path);
  const fs::path parent = p.parent_path();
  Dir::open(parent, Safety::plain, Create::no).write(p.filename().string(), bytes, mode);
}

}  // namespace npucache::storage
