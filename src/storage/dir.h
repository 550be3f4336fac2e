// A directory npucache writes in, opened once and used through its file
// descriptor (openat, linkat, renameat), so no operation follows a link
// someone planted in a path, and every file is created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600) before it is renamed or linked
// into place. The one way the project writes a file: a temporary in the
// target's directory, filled, fsynced, then renamed over the target (or
// linked, for files that must never be replaced), and the directory
// fsynced; a crash leaves the old file or the new one.
//
// A cache directory (Safety::cache) must be a directory, not a link, owned
// by the current user, and not writable by group or others unless the
// sticky bit is set: anything else is refused (CacheRefused, with the
// reason). Errors name the path and the system's reason ("No space left on
// device", "Read-only file system").
//
// Every system call goes through the Env of the current process context
// (process/env.h), so tests fail any of them on purpose.
#pragma once

#include "format/cache_error.h"
#include "storage/uses.h"

#include <sys/types.h>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::storage {

// A system call on the store's files failed: the disk or the file system
// (an I/O error, a full disk, a read-only file system), not the bytes. What
// a failed read would have returned is unknown, not damaged, so code that
// salvages, replaces or removes damaged files must not act on it. The
// message names the path and the system's reason.
class IoError : public CacheError {
 public:
  IoError(const std::string& what, int error) : CacheError(what), error_(error) {}
  // The errno of the failed call.
  int error() const { return error_; }
  // A failure of the storage itself (full, out of quota, an I/O error), as
  // opposed to one of permission or a read-only file system.
  bool storage_failed() const;

 private:
  int error_ = 0;
};

// An advisory lock (flock), exclusive or shared, held for the object's
// lifetime. flock locks belong to an open file: a process must not ask for
// a lock it already holds through another FileLock of the same file.
class FileLock {
 public:
  FileLock(int fd, std::string what, bool shared = false);
  // Takes the lock on `fd` within `wait_s` seconds (polling; the Env's
  // clock and sleep), or closes `fd` and returns nullopt.
  static std::optional<FileLock> within(int fd, std::string what, bool shared, double wait_s);
  ~FileLock();
  // The inode of the locked file (0 when it cannot be read): whether a
  // name still refers to it (Dir::stat's `ino`).
  ino_t inode() const;
  FileLock(FileLock&& o) noexcept : fd_(o.fd_), what_(std::move(o.what_)) { o.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  FileLock() = default;
  int fd_ = -1;
  std::string what_;
};

enum class Safety { cache, plain };
enum class Create { no, yes };

class Dir {
 public:
  // Throws CacheRefused (unsafe cache directory), CacheError (cannot open
  // or create; with Create::no, a missing directory).
  static Dir open(const std::filesystem::path& path, Safety safety, Create create);
  // What open(path, Safety::cache, Create::yes) would make of a missing
  // directory, creating nothing: the same checks of its parents and link,
  // then its nearest existing ancestor must be a directory this process
  // may write. Throws CacheError (CacheRefused) as that open would.
  static void check_creatable(const std::filesystem::path& path);
  // A subdirectory, with the same checks.
  Dir sub(const std::string& name, Create create) const;
  static bool exists(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_->fd; }

  struct Info {
    ino_t ino = 0;
    int64_t mtime_ns = 0;
    int64_t size = 0;
    bool regular = false;
    bool ours = false;  // owned by the current user
  };
  // Of `name` itself (a link is reported, not followed); nullopt when absent.
  std::optional<Info> stat(const std::string& name) const;
  // The contents of regular file `name`: nullopt when absent. A link is
  // refused (CacheRefused), and in a cache directory a file owned by
  // another user too; a file larger than `cap` bytes is a CacheError.
  std::optional<std::string> read(const std::string& name, std::size_t cap) const;
  // At most the first `n` bytes of regular file `name` (same checks as
  // read, any size): nullopt when absent.
  std::optional<std::string> head(const std::string& name, std::size_t n) const;
  // Replaces `name` atomically with `bytes` (mode `mode`, 0600 unless
  // said, less what the umask removes).
  void write(const std::string& name, std::string_view bytes, mode_t mode = 0600) const;
  // Creates `name` with `bytes` only if no file has that name: false (and
  // nothing written) when one does.
  bool publish(const std::string& name, std::string_view bytes) const;
  // Removes `name` (absent is not an error).
  void remove(const std::string& name) const;
  // Removes the empty subdirectory `name`: false (errno set) when it cannot.
  bool remove_empty_dir(const std::string& name) const;
  // Moves `name` out of the way atomically (rename to `to`).
  void rename(const std::string& name, const std::string& to) const;
  std::vector<std::string> list() const;
  // Locks `name` in this directory (created 0600 when missing), exclusively
  // or shared. The lock returned is on the file `name` refers to once it is
  // held: a file removed between the open and the lock (a claim released,
  // a clear) is no lock, and the name is opened again (CacheError when it
  // keeps being removed).
  FileLock lock(const std::string& name, bool shared = false) const;
  // The same within `wait_s` seconds, or nullopt (nothing held; also when
  // the file was removed under it 8 times in a row). A lock whose file
  // cannot be inspected (fstat failing) is taken without the check.
  std::optional<FileLock> lock_within(const std::string& name, bool shared, double wait_s) const;
  // Removes the lock file `name` while `held` (its lock) is held, only when
  // the name still refers to the locked file: false when it names another
  // (made after someone else removed this one), none, or cannot be told.
  bool remove_lock(const std::string& name, const FileLock& held) const;
  // Removes temporaries whose writers are gone: never one whose owner lock
  // is held (a live writer in any pid namespace or on any host sharing the
  // file system; docs/FORMAT.md, "Locks").
  std::size_t remove_stale_temps() const;
  // Removes temporary `name` unless its writer holds its owner lock (it is
  // writing it: clear leaves it); false when it is held (or gone).
  bool remove_unheld_temp(const std::string& name) const;

 private:
  bool names_lock(const std::string& name, const FileLock& held) const;
  struct Fd {
    int fd = -1;
    ~Fd();
  };
  std::optional<std::string> read_up_to(const std::string& name, std::size_t cap, bool truncate) const;
  Dir(std::shared_ptr<Fd> fd, std::filesystem::path path, Safety safety)
      : fd_(std::move(fd)), path_(std::move(path)), safety_(safety) {}
  // A new temporary for `name`, open for writing (`fd`), with its owner
  // lock held on `owner_fd` until the caller closes it.
  std::string temp_for(const std::string& name, int& fd, int& owner_fd, mode_t mode = 0600) const;
  void sync() const;
  std::shared_ptr<Fd> fd_;
  std::filesystem::path path_;
  Safety safety_;
};

// Writes `bytes` to `path` atomically (temporary, fsync, rename), mode
// `mode` (0600 unless said), never following a link at `path` (a link
// there is replaced, its target left as it was).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, mode_t mode = 0600);

}  // namespace npucache::storage
