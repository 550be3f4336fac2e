// An exclusive advisory lock (flock) on a file, held for the object's
// lifetime; serialises writers of one cache directory across processes.
// (flock is per machine: on network filesystems without it, give each node
// its own cache_dir.)
#pragma once

#include <string>

namespace npucache::cache {

class FileLock {
 public:
  explicit FileLock(const std::string& path);  // blocks until acquired
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace npucache::cache
