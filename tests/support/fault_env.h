// A process::Env for tests that wraps the real one (or another) and makes
// the outside world misbehave on purpose, deterministically: it counts every
// file operation by kind and by path, and fails the Nth call of a kind (on
// paths matching a pattern) with an errno of the test's choosing (ENOSPC,
// EIO, ...), makes the Nth read or write transfer fewer bytes than asked,
// makes the Nth read see the end of the file, or delays a call. Faults are
// counted in calls, never in time, so a test hits the same call on every
// run; a manual clock makes delays and the library's clock readings exact
// too.
//
//   auto env = std::make_shared<FaultEnv>();
//   process::Context::Scope scope(env);            // npucache uses it here
//   env->arm(Fault::fail(FileOp::write, 3, ENOSPC));  // the 3rd write from now
//   ... run the code under test ...
//   env->count(FileOp::write, "/objects/");            // writes of object files
//
// Paths are the calls' own, made absolute from the directory descriptor
// (/proc/self/fd), so a pattern can name a file ("stats.json"), a directory
// ("/objects/") or a temporary (".tmp."). A rename or link matches on either
// name. Thread-safe; the calls of one thread are counted in order.
#pragma once

#include "process/env.h"

#include <cerrno>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::testing_support {

enum class FileOp {
  open,    // openat without O_CREAT (files and directories)
  create,  // openat with O_CREAT (temporaries, lock files)
  read,    // read, pread
  write,   // write, pwrite
  fsync,   // fsync of a file or a directory
  close,
  stat,     // fstat, fstatat
  mkdir,    // mkdirat
  rename,   // renameat
  link,     // linkat
  unlink,   // unlinkat (files and empty directories)
  lock,     // flock (taking and releasing)
  list,     // list_dir
  resolve,  // realpath
};
constexpr std::size_t kOps = static_cast<std::size_t>(FileOp::resolve) + 1;
std::string_view op_name(FileOp op);

struct Fault {
  enum class Effect {
    fail,         // the call fails with `error` and does nothing
    short_io,     // read/write: transfers at most half the bytes asked (at least 1)
    end_of_file,  // read: returns 0, as if the file ended there
    delay,        // the call runs after `delay_s` (on the manual clock when set)
  };
  FileOp op = FileOp::write;
  std::size_t nth = 1;    // the nth matching call after arming (1-based)
  std::size_t times = 1;  // this many matching calls from the nth on; 0: every one
  std::string pattern;    // a substring of the call's path; empty: any
  Effect effect = Effect::fail;
  int error = EIO;
  double delay_s = 0;

  static Fault fail(FileOp op, std::size_t nth, int error, std::string pattern = {}) {
    Fault f;
    f.op = op;
    f.nth = nth;
    f.error = error;
    f.pattern = std::move(pattern);
    return f;
  }
  static Fault short_read(std::size_t nth, std::string pattern = {}) {
    Fault f = fail(FileOp::read, nth, 0, std::move(pattern));
    f.effect = Effect::short_io;
    return f;
  }
  static Fault short_write(std::size_t nth, std::string pattern = {}) {
    Fault f = fail(FileOp::write, nth, 0, std::move(pattern));
    f.effect = Effect::short_io;
    return f;
  }
  static Fault end_of_file(std::size_t nth, std::string pattern = {}) {
    Fault f = fail(FileOp::read, nth, 0, std::move(pattern));
    f.effect = Effect::end_of_file;
    return f;
  }
  static Fault slow(FileOp op, std::size_t nth, double seconds, std::string pattern = {}) {
    Fault f = fail(op, nth, 0, std::move(pattern));
    f.effect = Effect::delay;
    f.delay_s = seconds;
    return f;
  }
};

class FaultEnv : public process::Env {
 public:
  // One call as the Env saw it.
  struct Call {
    FileOp op;
    std::string path;  // "old -> new" for rename and link
    long result = 0;   // what the call returned
    int error = 0;     // errno when it failed
    bool faulted = false;
  };

  explicit FaultEnv(std::shared_ptr<process::Env> base = process::default_env());

  // Arms a fault; its nth counts the matching calls from now on.
  void arm(const Fault& f);
  // Removes every armed fault (those that fired stay in the log).
  void disarm();
  // Forgets the calls counted so far (faults stay armed).
  void reset_counts();
  // Calls of `op` on paths containing `pattern`, since the last reset.
  std::size_t count(FileOp op, std::string_view pattern = {}) const;
  std::vector<Call> calls() const;
  // The calls a fault hit, since the last reset.
  std::vector<Call> faulted() const;
  // Writes to the log, one line per call (for a failing test's message).
  std::string describe() const;

  // The clocks: the base's unless a manual clock is set; a manual clock
  // moves only when advanced, slept on or delayed by a fault.
  void set_manual_clock(double monotonic_s, double wall_s);
  void advance(double seconds);
  // Reports inode `ino` for every path ending in `suffix` that fstatat
  // inspects: a file rewritten onto another inode looks, by its stat, like
  // one rewritten in place (as a file system that reuses the inode a rename
  // freed makes it), whatever this file system does.
  void pin_inode(const std::string& suffix, ino_t ino);

  int openat(int dirfd, const char* name, int flags, mode_t mode = 0) override;
  ssize_t read(int fd, void* buf, std::size_t n) override;
  ssize_t pread(int fd, void* buf, std::size_t n, off_t offset) override;
  ssize_t write(int fd, const void* buf, std::size_t n) override;
  ssize_t pwrite(int fd, const void* buf, std::size_t n, off_t offset) override;
  int fsync(int fd) override;
  int close(int fd) override;
  int fstat(int fd, struct stat* st) override;
  int fstatat(int dirfd, const char* name, struct stat* st, int flags) override;
  int mkdirat(int dirfd, const char* name, mode_t mode) override;
  int renameat(int olddirfd, const char* oldname, int newdirfd, const char* newname) override;
  int linkat(int olddirfd, const char* oldname, int newdirfd, const char* newname, int flags) override;
  int unlinkat(int dirfd, const char* name, int flags) override;
  int flock(int fd, int operation) override;
  int list_dir(int dirfd, std::vector<std::string>& names) override;
  int realpath(const char* path, std::string& resolved) override;
  double monotonic_s() override;
  double wall_s() override;
  void sleep_s(double seconds) override;

 private:
  struct Armed {
    Fault fault;
    std::size_t seen = 0;  // matching calls so far
  };
  // Counts the call and returns the fault that hits it, if any.
  std::optional<Fault> enter(FileOp op, const std::string& path);
  // Logs the outcome; returns `result` with errno as the call left it.
  long leave(FileOp op, std::string path, long result, int error, bool faulted);
  template <class F>
  long run(FileOp op, std::string path, F&& call);
  template <class F>
  ssize_t transfer(FileOp op, int fd, std::size_t n, F&& call);

  std::shared_ptr<process::Env> base_;
  mutable std::mutex mu_;
  std::vector<Armed> armed_;
  std::vector<Call> calls_;
  bool manual_clock_ = false;
  double monotonic_ = 0, wall_ = 0;
  std::vector<std::pair<std::string, ino_t>> pinned_;
};

}  // namespace npucache::testing_support
