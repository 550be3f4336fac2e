// The cache layer's public functions (include/npucache/cache.h) other than
// cache_compile: readable text, the Mega-Cache, the default directory.
#include <npucache/cache.h>

#include "admin/admin.h"
#include "cache/registry.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "format/readable.h"
#include "process/settings.h"
#include "storage/dir.h"
#include "storage/store.h"
#include "storage/templates.h"

#include <cstdlib>
#include <filesystem>

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

std::string save_cache_artifacts() { return cache::write_bundle(cache::remembered()); }

void load_cache_artifacts(std::string_view bytes, const std::string& cache_dir) {
  cache::admin::import_bytes(bytes,
                             cache_dir.empty() ? default_cache_dir() : std::filesystem::absolute(cache_dir).string());
}

}  // namespace npucache
