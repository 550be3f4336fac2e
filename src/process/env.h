// The outside world, as leveldb's Env: every file-system call of the store
// and every clock reading of the library go through one Env, so that tests
// replace it (tests/support/fault_env.h) to inject faults -- a full disk
// at the Nth write, an I/O error, short reads, a slow clock -- without
// root tricks or timing luck. The process context (context.h) holds the
// Env in use; default_env() is the real one (POSIX calls, the system
// clocks).
//
// The file operations are the POSIX calls the store makes, with their
// arguments and return conventions: -1 (or a negative count) and errno on
// failure, so callers word errors as before ("No space left on device").
// File descriptors are the kernel's: an Env that wraps another passes them
// through, and a descriptor opened under one Env may be used or closed
// under another (a lock taken in a test's scope released after it).
//
// Thread safety: an Env is used from every thread at once.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace npucache::process {

class Env {
 public:
  virtual ~Env() = default;

  // --- Files ------------------------------------------------------------------
  // openat(2); `mode` is used with O_CREAT.
  virtual int openat(int dirfd, const char* name, int flags, mode_t mode = 0);
  virtual ssize_t read(int fd, void* buf, std::size_t n);
  virtual ssize_t pread(int fd, void* buf, std::size_t n, off_t offset);
  virtual ssize_t write(int fd, const void* buf, std::size_t n);
  virtual ssize_t pwrite(int fd, const void* buf, std::size_t n, off_t offset);
  virtual int fsync(int fd);
  virtual int close(int fd);
  virtual int fstat(int fd, struct stat* st);
  // fstatat(2): AT_FDCWD with an absolute path is stat/lstat.
  virtual int fstatat(int dirfd, const char* name, struct stat* st, int flags);
  virtual int mkdirat(int dirfd, const char* name, mode_t mode);
  virtual int renameat(int olddirfd, const char* oldname, int newdirfd, const char* newname);
  virtual int linkat(int olddirfd, const char* oldname, int newdirfd, const char* newname, int flags);
  virtual int unlinkat(int dirfd, const char* name, int flags);
  virtual int flock(int fd, int operation);
  // The names in directory `dirfd` (without "." and ".."), unsorted, as
  // fdopendir/readdir give them on a descriptor of its own (`dirfd` stays
  // open and unmoved): 0, or -1 and errno.
  virtual int list_dir(int dirfd, std::vector<std::string>& names);
  // realpath(3): 0 and the resolved path, or -1 and errno.
  virtual int realpath(const char* path, std::string& resolved);

  // --- Clocks -----------------------------------------------------------------
  // Seconds on a monotonic clock (deadlines, durations).
  virtual double monotonic_s();
  // Seconds since the Unix epoch (dates, last use).
  virtual double wall_s();
  // Waits `seconds` (retries, polling).
  virtual void sleep_s(double seconds);
};

// The real world: POSIX calls and the system clocks.
std::shared_ptr<Env> default_env();

}  // namespace npucache::process
