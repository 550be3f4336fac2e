#include "support/fault_env.h"

#include <fcntl.h>
#include <unistd.h>
#include <climits>
#include <cstring>

namespace npucache::testing_support {
namespace {

// The path of an open descriptor, as the kernel names it.
std::string fd_path(int fd) {
  if (fd == AT_FDCWD) {
    char buf[PATH_MAX];
    return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string(".");
  }
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n < 0) return "<fd " + std::to_string(fd) + ">";
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string at_path(int dirfd, const char* name) {
  if (name[0] == '/') return name;
  const std::string dir = fd_path(dirfd);
  if (std::strcmp(name, ".") == 0) return dir;
  return dir + "/" + name;
}

}  // namespace

std::string_view op_name(FileOp op) {
  static constexpr std::string_view names[kOps] = {"open",  "create", "read", "write",  "fsync", "close", "stat",
                                                   "mkdir", "rename", "link", "unlink", "lock",  "list",  "resolve"};
  return names[static_cast<std::size_t>(op)];
}

FaultEnv::FaultEnv(std::shared_ptr<process::Env> base) : base_(std::move(base)) {}

void FaultEnv::arm(const Fault& f) {
  std::lock_guard lock(mu_);
  armed_.push_back({f, 0});
}

void FaultEnv::disarm() {
  std::lock_guard lock(mu_);
  armed_.clear();
}

void FaultEnv::reset_counts() {
  std::lock_guard lock(mu_);
  calls_.clear();
}

std::size_t FaultEnv::count(FileOp op, std::string_view pattern) const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& c : calls_)
    if (c.op == op && c.path.find(pattern) != std::string::npos) ++n;
  return n;
}

std::vector<FaultEnv::Call> FaultEnv::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<FaultEnv::Call> FaultEnv::faulted() const {
  std::lock_guard lock(mu_);
  std::vector<Call> out;
  for (const auto& c : calls_)
    if (c.faulted) out.push_back(c);
  return out;
}

std::string FaultEnv::describe() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& c : calls_) {
    out += std::string(op_name(c.op)) + " " + c.path + " -> " + std::to_string(c.result);
    if (c.error != 0) out += std::string(" (") + std::strerror(c.error) + ")";
    if (c.faulted) out += " [fault]";
    out += "\n";
  }
  return out;
}

void FaultEnv::set_manual_clock(double monotonic_s, double wall_s) {
  std::lock_guard lock(mu_);
  manual_clock_ = true;
  monotonic_ = monotonic_s;
  wall_ = wall_s;
}

void FaultEnv::advance(double seconds) {
  std::lock_guard lock(mu_);
  monotonic_ += seconds;
  wall_ += seconds;
}

std::optional<Fault> FaultEnv::enter(FileOp op, const std::string& path) {
  std::lock_guard lock(mu_);
  std::optional<Fault> hit;
  for (auto& a : armed_) {
    if (a.fault.op != op || path.find(a.fault.pattern) == std::string::npos) continue;
    ++a.seen;
    if (!hit && a.seen >= a.fault.nth && (a.fault.times == 0 || a.seen < a.fault.nth + a.fault.times)) hit = a.fault;
  }
  return hit;
}

long FaultEnv::leave(FileOp op, std::string path, long result, int error, bool faulted) {
  std::lock_guard lock(mu_);
  calls_.push_back({op, std::move(path), result, result < 0 ? error : 0, faulted});
  return result;
}

template <class F>
long FaultEnv::run(FileOp op, std::string path, F&& call) {
  const std::optional<Fault> f = enter(op, path);
  if (f && f->effect == Fault::Effect::fail) {
    leave(op, std::move(path), -1, f->error, true);
    errno = f->error;
    return -1;
  }
  if (f && f->effect == Fault::Effect::delay) sleep_s(f->delay_s);
  const long r = call();
  const int e = errno;
  leave(op, std::move(path), r, e, f.has_value());
  errno = e;
  return r;
}

template <class F>
ssize_t FaultEnv::transfer(FileOp op, int fd, std::size_t n, F&& call) {
  std::string path = fd_path(fd);
  const std::optional<Fault> f = enter(op, path);
  std::size_t ask = n;
  if (f) {
    switch (f->effect) {
      case Fault::Effect::fail:
        leave(op, std::move(path), -1, f->error, true);
        errno = f->error;
        return -1;
      case Fault::Effect::end_of_file:
        if (op == FileOp::read) {
          leave(op, std::move(path), 0, 0, true);
          return 0;
        }
        break;
      case Fault::Effect::short_io: ask = n > 1 ? n / 2 : n; break;
      case Fault::Effect::delay: sleep_s(f->delay_s); break;
    }
  }
  const ssize_t r = call(ask);
  const int e = errno;
  leave(op, std::move(path), static_cast<long>(r), e, f.has_value());
  errno = e;
  return r;
}

int FaultEnv::openat(int dirfd, const char* name, int flags, mode_t mode) {
  return static_cast<int>(run((flags & O_CREAT) != 0 ? FileOp::create : FileOp::open, at_path(dirfd, name),
                              [&] { return static_cast<long>(base_->openat(dirfd, name, flags, mode)); }));
}

ssize_t FaultEnv::read(int fd, void* buf, std::size_t n) {
  return transfer(FileOp::read, fd, n, [&](std::size_t k) { return base_->read(fd, buf, k); });
}

ssize_t FaultEnv::pread(int fd, void* buf, std::size_t n, off_t offset) {
  return transfer(FileOp::read, fd, n, [&](std::size_t k) { return base_->pread(fd, buf, k, offset); });
}

ssize_t FaultEnv::write(int fd, const void* buf, std::size_t n) {
  return transfer(FileOp::write, fd, n, [&](std::size_t k) { return base_->write(fd, buf, k); });
}

ssize_t FaultEnv::pwrite(int fd, const void* buf, std::size_t n, off_t offset) {
  return transfer(FileOp::write, fd, n, [&](std::size_t k) { return base_->pwrite(fd, buf, k, offset); });
}

int FaultEnv::fsync(int fd) {
  return static_cast<int>(run(FileOp::fsync, fd_path(fd), [&] { return static_cast<long>(base_->fsync(fd)); }));
}

int FaultEnv::close(int fd) {
  std::string path = fd_path(fd);
  const std::optional<Fault> f = enter(FileOp::close, path);
  if (f && f->effect == Fault::Effect::fail) {
    // As Linux does: the descriptor is released even when close reports an
    // error (a write-back failure on NFS, say).
    base_->close(fd);
    leave(FileOp::close, std::move(path), -1, f->error, true);
    errno = f->error;
    return -1;
  }
  if (f && f->effect == Fault::Effect::delay) sleep_s(f->delay_s);
  const int r = base_->close(fd);
  const int e = errno;
  leave(FileOp::close, std::move(path), r, e, f.has_value());
  errno = e;
  return r;
}

int FaultEnv::fstat(int fd, struct stat* st) {
  return static_cast<int>(run(FileOp::stat, fd_path(fd), [&] { return static_cast<long>(base_->fstat(fd, st)); }));
}

void FaultEnv::pin_inode(const std::string& suffix, ino_t ino) {
  std::lock_guard lock(mu_);
  pinned_.emplace_back(suffix, ino);
}

int FaultEnv::fstatat(int dirfd, const char* name, struct stat* st, int flags) {
  const std::string path = at_path(dirfd, name);
  const int rc = static_cast<int>(
      run(FileOp::stat, path, [&] { return static_cast<long>(base_->fstatat(dirfd, name, st, flags)); }));
  if (rc == 0) {
    std::lock_guard lock(mu_);
    for (const auto& [suffix, ino] : pinned_)
      if (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
        st->st_ino = ino;
  }
  return rc;
}

int FaultEnv::mkdirat(int dirfd, const char* name, mode_t mode) {
  return static_cast<int>(
      run(FileOp::mkdir, at_path(dirfd, name), [&] { return static_cast<long>(base_->mkdirat(dirfd, name, mode)); }));
}

int FaultEnv::renameat(int olddirfd, const char* oldname, int newdirfd, const char* newname) {
  return static_cast<int>(run(FileOp::rename, at_path(olddirfd, oldname) + " -> " + at_path(newdirfd, newname), [&] {
    return static_cast<long>(base_->renameat(olddirfd, oldname, newdirfd, newname));
  }));
}

int FaultEnv::linkat(int olddirfd, const char* oldname, int newdirfd, const char* newname, int flags) {
  return static_cast<int>(run(FileOp::link, at_path(olddirfd, oldname) + " -> " + at_path(newdirfd, newname), [&] {
    return static_cast<long>(base_->linkat(olddirfd, oldname, newdirfd, newname, flags));
  }));
}

int FaultEnv::unlinkat(int dirfd, const char* name, int flags) {
  return static_cast<int>(run(FileOp::unlink, at_path(dirfd, name),
                              [&] { return static_cast<long>(base_->unlinkat(dirfd, name, flags)); }));
}

int FaultEnv::flock(int fd, int operation) {
  return static_cast<int>(
      run(FileOp::lock, fd_path(fd), [&] { return static_cast<long>(base_->flock(fd, operation)); }));
}

int FaultEnv::list_dir(int dirfd, std::vector<std::string>& names) {
  return static_cast<int>(
      run(FileOp::list, fd_path(dirfd), [&] { return static_cast<long>(base_->list_dir(dirfd, names)); }));
}

int FaultEnv::realpath(const char* path, std::string& resolved) {
  return static_cast<int>(
      run(FileOp::resolve, path, [&] { return static_cast<long>(base_->realpath(path, resolved)); }));
}

double FaultEnv::monotonic_s() {
  {
    std::lock_guard lock(mu_);
    if (manual_clock_) return monotonic_;
  }
  return base_->monotonic_s();
}

double FaultEnv::wall_s() {
  {
    std::lock_guard lock(mu_);
    if (manual_clock_) return wall_;
  }
  return base_->wall_s();
}

void FaultEnv::sleep_s(double seconds) {
  {
    std::lock_guard lock(mu_);
    if (manual_clock_) {
      if (seconds > 0) {
        monotonic_ += seconds;
        wall_ += seconds;
      }
      return;
    }
  }
  base_->sleep_s(seconds);
}

}  // namespace npucache::testing_support
