// Things said once per process: a service of the process context
// (context.h) that remembers keys, so a warning about a refused directory,
// a failing remote or a mismatched setting is given once, not on every
// method, and again in a new context (a test's scope).
// Thread safety: first() may be called from any thread.
#pragma once

#include <mutex>
#include <set>
#include <string>

namespace npucache::process {

class Once {
 public:
  // True the first time `key` is seen.
  bool first(const std::string& key) {
    std::lock_guard lock(mu_);
    return seen_.insert(key).second;
  }

 private:
  std::mutex mu_;
  std::set<std::string> seen_;
};

}  // namespace npucache::process
