// The cache layer's public functions (include/npucache/cache.h) other than
// cache_compile: readable text, the Mega-Cache, the default directory.
#include <npucache/cache.h>

#include "admin/admin.h"
#include "cache/registry.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "format/readable.h"
#include "log/log.h"
#include "process/settings.h"
#include "storage/dir.h"
#include "storage/store.h"
#include "storage/templates.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

namespace npucache {

std::string default_cache_dir() {
  // NPUCACHE_CACHE_DIR, else the user's npucache.conf, else .npucache.
  return std::filesystem::absolute(process::setting("cache_dir").value).string();
}

std::string readable_cache(const std::string& path, const std::string& file) {
  auto [dir, entry_path] = cache::split_cache_path(path);
  const cache::Store store = cache::Store::open(dir, cache::Create::no);
  auto e = store.entry(entry_path);
  if (!e) throw CacheError("no cache entry '" + entry_path + "' in " + dir + "; `npucache ls " + dir + "` lists them");
  std::string text = cache::readable_entry(*e, store.object(e->graph_key));
  // The capture templates of its program (reduce-overhead): tasks and slots.
  for (const auto& t : cache::stored_templates(store)) {
    if (!t.record || t.record->validity.graph_key != e->graph_key) continue;
    const compiler::CaptureTemplate ct = compiler::decode_template(t.record->bytes);
    text += "\n## capture template " + t.key + " (sizes " + t.record->validity.binding + ", pool " +
            std::to_string(ct.footprint) + " bytes, " + std::to_string(ct.tasks.size()) +
            " tasks; slot 0 the pool, 1.. the inputs, then the parameters)\n";
    for (const auto& line : cache::template_listing(ct)) text += line + "\n";
  }
  if (!file.empty()) cache::write_file_atomically(file, text);
  return text;
}

std::string save_cache_artifacts() {
  cache::Remembered r = cache::remembered();
  // Each object's regions vouched for by the directory it came from (a
  // program loaded from an unsigned remote is not, unless that
  // directory's own regions/ holds its regions).
  std::map<std::string, std::set<std::string>> by_dir;
  for (const auto& [key, dir] : r.dirs) by_dir[dir].insert(key);
  for (const auto& [dir, keys] : by_dir) {
    std::optional<cache::Store> store;
    try {
      if (cache::Dir::exists(dir)) store.emplace(cache::Store::open(dir, cache::Create::no));
    } catch (const Error& e) {  // an unusable directory vouches for nothing
      log::debug("no region of the objects of {} is vouched for: {}", dir, e.what());
    }
    const auto u = cache::admin::unvouched_regions(store ? &*store : nullptr, r.bundle, keys);
    r.bundle.unvouched.insert(u.begin(), u.end());
  }
  return cache::write_bundle(r.bundle);
}

void load_cache_artifacts(std::string_view bytes, const std::string& cache_dir) {
  cache::admin::import_bytes(bytes,
                             cache_dir.empty() ? default_cache_dir() : std::filesystem::absolute(cache_dir).string());
}

}  // namespace npucache
