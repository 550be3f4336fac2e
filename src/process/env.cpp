#include "process/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

namespace npucache::process {

int Env::openat(int dirfd, const char* name, int flags, mode_t mode) { return ::openat(dirfd, name, flags, mode); }

ssize_t Env::read(int fd, void* buf, std::size_t n) { return ::read(fd, buf, n); }

ssize_t Env::pread(int fd, void* buf, std::size_t n, off_t offset) { return ::pread(fd, buf, n, offset); }

ssize_t Env::write(int fd, const void* buf, std::size_t n) { return ::write(fd, buf, n); }

ssize_t Env::pwrite(int fd, const void* buf, std::size_t n, off_t offset) { return ::pwrite(fd, buf, n, offset); }

int Env::fsync(int fd) { return ::fsync(fd); }

int Env::close(int fd) { return ::close(fd); }

int Env::fstat(int fd, struct stat* st) { return ::fstat(fd, st); }

int Env::fstatat(int dirfd, const char* name, struct stat* st, int flags) { return ::fstatat(dirfd, name, st, flags); }

int Env::mkdirat(int dirfd, const char* name, mode_t mode) { return ::mkdirat(dirfd, name, mode); }

int Env::renameat(int olddirfd, const char* oldname, int newdirfd, const char* newname) {
  return ::renameat(olddirfd, oldname, newdirfd, newname);
}

int Env::linkat(int olddirfd, const char* oldname, int newdirfd, const char* newname, int flags) {
  return ::linkat(olddirfd, oldname, newdirfd, newname, flags);
}

int Env::unlinkat(int dirfd, const char* name, int flags) { return ::unlinkat(dirfd, name, flags); }

int Env::flock(int fd, int operation) { return ::flock(fd, operation); }

int Env::list_dir(int dirfd, std::vector<std::string>& names) {
  // A descriptor of its own: fdopendir takes it over, and readdir moves
  // its offset.
  const int f = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f < 0) return -1;
  DIR* d = ::fdopendir(f);
  if (!d) {
    const int e = errno;
    ::close(f);
    errno = e;
    return -1;
  }
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d);
    if (!e) break;
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  const int e = errno;
  ::closedir(d);
  errno = e;
  return e == 0 ? 0 : -1;
}

int Env::realpath(const char* path, std::string& resolved) {
  char* r = ::realpath(path, nullptr);
  if (!r) return -1;
  resolved = r;
  std::free(r);
  return 0;
}

double Env::monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Env::wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Env::sleep_s(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

std::shared_ptr<Env> default_env() {
  static const std::shared_ptr<Env> env = std::make_shared<Env>();
  return env;
}

}  // namespace npucache::process
