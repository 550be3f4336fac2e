#include "cache/registry.h"

#include <map>
#include <mutex>

namespace npucache::cache {
namespace {
std::mutex g_mu;
std::map<std::string, EntryRecord> g_entries;   // by entry path
std::map<std::string, ObjectRecord> g_objects;  // by graph key
}  // namespace

void remember(const EntryRecord& e, const ObjectRecord& o) {
  std::lock_guard lock(g_mu);
  g_entries[e.path] = e;
  g_objects.emplace(o.graph_key, o);
}

Bundle remembered() {
  std::lock_guard lock(g_mu);
  Bundle b;
  for (const auto& [p, e] : g_entries) b.entries.push_back(e);
  for (const auto& [k, o] : g_objects) b.objects.push_back(o);
  return b;
}

}  // namespace npucache::cache
