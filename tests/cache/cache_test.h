// The fixture of the cache tests across processes (test_cache.cpp,
// test_cache_formats.cpp): a scratch cache directory and cache_worker's
// command line on it.
#pragma once

#include "support/cache_files.h"
#include "support/temp_dir_test.h"

#include <string>
#include <vector>

// cache_worker running the seed model on `dir` with `args`.
inline std::string worker(const std::string& dir, const std::string& args = "prompt") {
  return std::string(CACHE_WORKER) + " run " + dir + " seed " + args;
}

class CacheTest : public npucache::testing_support::TempDirTest {
 protected:
  std::vector<std::string> entry_paths() { return npucache::testing_support::entry_paths(dir); }
};
