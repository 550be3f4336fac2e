// Where the shipped model configs are found (hf_config.h).
#include <npucache/error.h>
#include <npucache/models/hf_config.h>

#include <link.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <utility>

// Set by the build (src/CMakeLists.txt): the configs directory relative to
// the directory of the file holding this code -- installed, from the
// library's directory or from a program's (the npucache command links the
// models statically), and in the build tree. All are relative, so a moved
// installation finds its own configs and an installed library or program
// never looks into the tree it was built in.
#ifndef NPUCACHE_CONFIG_DIR_FROM_LIBDIR
#error "NPUCACHE_CONFIG_DIR_FROM_LIBDIR must be defined by the build"
#endif
#ifndef NPUCACHE_CONFIG_DIR_FROM_BINDIR
#error "NPUCACHE_CONFIG_DIR_FROM_BINDIR must be defined by the build"
#endif
#ifndef NPUCACHE_BUILD_CONFIG_DIR_FROM_LIBDIR
#error "NPUCACHE_BUILD_CONFIG_DIR_FROM_LIBDIR must be defined by the build"
#endif

namespace npucache::models {
namespace {

namespace fs = std::filesystem;

const int kAnchor = 0;  // an object of this code, to ask the loader where it is

// The file holding this code: the shared library, or the program it is
// linked into (which the loader lists without a name).
struct CodeFile {
  fs::path path;
  bool program = false;
};

int find_anchor(dl_phdr_info* info, std::size_t, void* data) {
  const auto addr = reinterpret_cast<uintptr_t>(&kAnchor);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && addr >= info->dlpi_addr + ph.p_vaddr &&
        addr < info->dlpi_addr + ph.p_vaddr + ph.p_memsz) {
      auto* out = static_cast<CodeFile*>(data);
      out->program = info->dlpi_name == nullptr || *info->dlpi_name == '\0';
      out->path = out->program ? "/proc/self/exe" : info->dlpi_name;
      return 1;
    }
  }
  return 0;
}

// The directory of the file holding this code, and whether it is a program.
std::pair<fs::path, bool> code_dir() {
  CodeFile file;
  if (dl_iterate_phdr(find_anchor, &file) == 0 || file.path.empty()) return {};
  std::error_code ec;
  const fs::path canonical = fs::canonical(file.path, ec);
  if (ec) return {};
  return {canonical.parent_path(), file.program};
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
  if (const auto [dir, program] = code_dir(); !dir.empty()) {
    // The installed place; the build tree's only when that does not exist
    // (the library or program runs from its build tree).
    const fs::path installed =
        (dir / (program ? NPUCACHE_CONFIG_DIR_FROM_BINDIR : NPUCACHE_CONFIG_DIR_FROM_LIBDIR)).lexically_normal();
    const fs::path build = (dir / NPUCACHE_BUILD_CONFIG_DIR_FROM_LIBDIR).lexically_normal();
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
