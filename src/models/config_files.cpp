// Where the shipped model configs are found (hf_config.h).
#include <npucache/error.h>
#include <npucache/models/hf_config.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

// Set by the build (src/CMakeLists.txt): the configs directory relative to
// the library's directory, installed and in the build tree. Both are
// relative, so a moved installation finds its own configs and an installed
// library never looks into the tree it was built in.
#ifndef NPUCACHE_CONFIG_DIR_FROM_LIBDIR
#error "NPUCACHE_CONFIG_DIR_FROM_LIBDIR must be defined by the build"
#endif
#ifndef NPUCACHE_BUILD_CONFIG_DIR_FROM_LIBDIR
#error "NPUCACHE_BUILD_CONFIG_DIR_FROM_LIBDIR must be defined by the build"
#endif

namespace npucache::models {
namespace {

namespace fs = std::filesystem;

const int kAnchor = 0;  // an object of this library, to ask the loader where it is

// The directory of the shared library holding this code.
fs::path library_dir() {
  Dl_info info{};
  if (dladdr(&kAnchor, &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  fs::path lib = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : lib.parent_path();
}

}  // namespace

std::vector<std::string> config_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("NPUCACHE_CONFIG_PATH")) {
    std::string s = env;
    std::size_t at = 0;
    while (at <= s.size()) {
      std::size_t end = s.find(':', at);
      if (end == std::string::npos) end = s.size();
      if (end > at) dirs.push_back(s.substr(at, end - at));
      at = end + 1;
    }
  }
  if (const fs::path lib = library_dir(); !lib.empty()) {
    // The installed place; the build tree's only when that does not exist
    // (the library runs from its build tree).
    const fs::path installed = (lib / NPUCACHE_CONFIG_DIR_FROM_LIBDIR).lexically_normal();
    const fs::path build = (lib / NPUCACHE_BUILD_CONFIG_DIR_FROM_LIBDIR).lexically_normal();
    std::error_code ec;
    if (build != installed && !fs::is_directory(installed, ec) && fs::is_directory(build, ec))
      dirs.push_back(build.string());
    else
      dirs.push_back(installed.string());
  }
  return dirs;
}

std::vector<std::string> shipped_config_names() {
  std::set<std::string> names;
  for (const auto& d : config_search_path()) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".json") names.insert(it->path().stem().string());
  }
  return {names.begin(), names.end()};
}

std::string find_shipped_config(const std::string& name) {
  for (const auto& d : config_search_path()) {
    const fs::path p = fs::path(d) / (name + ".json");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  std::string names, dirs;
  for (const auto& n : shipped_config_names()) names += (names.empty() ? "" : ", ") + n;
  for (const auto& d : config_search_path()) dirs += (dirs.empty() ? "" : ", ") + d;
  throw ConfigError("unknown model '" + name +
                    "': not tiny-llama, not a path to a config.json, and no shipped config " +
                    "of that name (shipped: " + (names.empty() ? "none found" : names) + "; searched " + dirs +
                    "; NPUCACHE_CONFIG_PATH adds directories)");
}

}  // namespace npucache::models
