#include "cache/atomic_file.h"

#include "cache/cache_error.h"
#include "cache/layout.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace npucache::cache {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& p, int err) {
  throw CacheError(what + " " + p.string() + " failed: " + std::strerror(err));
}

}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  const fs::path dir = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
  temp_ = dir / layout::temp_name(target_.filename().string());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("creating", temp_, errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing", temp_, errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("syncing", temp_, errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("closing", temp_, errno);
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("renaming a temporary over", target_, errno);
  committed_ = true;
  fsync_directory(target_.parent_path().empty() ? fs::path(".") : target_.parent_path());
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("opening directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail("syncing directory", dir, err);
}

}  // namespace npucache::cache
