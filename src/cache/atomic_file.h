// The one way npucache writes a file: a temporary in the target's directory,
// created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, so a planted
// link or file is never followed or reused), filled, fsynced, then renamed
// over the target, and the directory fsynced. A crash at any instant leaves
// the old file or the new one; readers never see a partial file.
//
// As in ccache, commit() is explicit: the destructor of an uncommitted
// AtomicFile removes the temporary instead of publishing half-written data.
// Failures throw CacheError naming the path and the system error
// ("No space left on device").
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace npucache::cache {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& target() const { return target_; }
  // For writers that need a path (HDF5): the temporary, already created.
  const std::filesystem::path& temp_path() const { return temp_; }
  void write(std::string_view bytes);
  // fsync, rename over the target, fsync of the directory.
  void commit();

 private:
  std::filesystem::path target_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically (above).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// fsync of a directory (after a rename or unlink in it).
void fsync_directory(const std::filesystem::path& dir);

}  // namespace npucache::cache
