#include "cache/registry.h"

#include "process/context.h"

#include <map>
#include <mutex>
#include <utility>

namespace npucache::cache {
namespace {

// A service of the process context.
struct Registry {
  std::mutex mu;
  std::map<std::string, EntryRecord> entries;   // by entry path
  std::map<std::string, ObjectRecord> objects;  // by graph key
  std::map<std::string, std::string> dirs;      // by graph key
};

Registry& registry() { return process::Context::current().get<Registry>(); }

}  // namespace

void remember(const std::string& dir, const EntryRecord& e, ObjectRecord o) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.entries[e.path] = e;
  const std::string key = o.graph_key;
  if (r.objects.try_emplace(key, std::move(o)).second) r.dirs[key] = dir;
}

Remembered remembered() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  Remembered out;
  for (const auto& [p, e] : r.entries) out.bundle.entries.push_back(e);
  for (const auto& [k, o] : r.objects) out.bundle.objects.push_back(o);
  out.dirs = r.dirs;
  return out;
}

}  // namespace npucache::cache
