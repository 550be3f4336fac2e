// A private temporary directory for a test or a test program, removed when
// it goes out of scope. No GoogleTest here: programs without it (the
// fuzzer, the differential hunt, redis_server.h) use it too; a gtest
// fixture is in support/temp_dir_test.h.
//
//   TempDir tmp("records");              // or TempDir tmp("records", test name)
//   const fs::path cache = tmp.path() / "cache";  // not created: a cache makes its own
//
// Contract:
//   - path() is temp_directory_path() / "npucache-<tag>-<pid>[-<test>]-<n>",
//     <test> the name given ('/' of a parameterized test's "Name/0" made
//     '_'; left out when empty), <n> a counter of the process: two TempDirs
//     of one process, or of two processes, never share a directory.
//   - The constructor removes any leftover at that path and creates the
//     directory empty, mode 0700 (owner only); it throws
//     std::filesystem::filesystem_error when it cannot.
//   - The destructor gives the owner back the permissions of every
//     directory under it (tests chmod things to 000), without following
//     symbolic links, and removes it all. It never throws; what it cannot
//     remove is left.
//   - keep() leaves the directory in place (e.g. a log an error names).
//   - Neither copyable nor movable.
#pragma once

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace npucache::testing_support {

class TempDir {
 public:
  explicit TempDir(std::string_view tag, std::string_view test_name = {}) {
    std::string name = "npucache-" + std::string(tag) + "-" + std::to_string(::getpid());
    if (!test_name.empty()) {
      std::string test(test_name);
      for (char& c : test)
        if (c == '/') c = '_';
      name += "-" + test;
    }
    name += "-" + std::to_string(counter()++);
    path_ = std::filesystem::temp_directory_path() / name;
    remove_tree(path_);
    std::filesystem::create_directory(path_);
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace);
  }
  ~TempDir() {
    if (!keep_) remove_tree(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  static std::atomic<unsigned>& counter() {
    static std::atomic<unsigned> n{0};
    return n;
  }
  // Owner rwx on `p` and every directory under it (never through a link).
  static void restore_owner(const std::filesystem::path& p) noexcept {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::symlink_status(p, ec).type() != fs::file_type::directory) return;
    fs::permissions(p, fs::perms::owner_all, fs::perm_options::add, ec);
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) restore_owner(it->path());
  }
  static void remove_tree(const std::filesystem::path& p) noexcept {
    restore_owner(p);
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }

  std::filesystem::path path_;
  bool keep_ = false;
};

}  // namespace npucache::testing_support
