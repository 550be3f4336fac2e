#include "cache/registry.h"

#include "process/context.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace npucache::cache {
namespace {

// An object as its entries name it: by graph key and checksum.
using ObjectId = std::pair<std::string, std::string>;

ObjectId id_of(const EntryRecord& e) { return {e.graph_key, e.object_checksum}; }

// A service of the process context.
struct Registry {
  struct Held {
    EntryRecord entry;
    std::uint64_t order = 0;  // when it was remembered (the latest is the highest)
  };
  struct Object {
    ObjectRecord record;
    std::string dir;  // where it was saved to or loaded from
  };
  std::mutex mu;
  std::uint64_t clock = 0;
  std::map<std::string, Held> entries;  // by entry path
  std::map<ObjectId, Object> objects;   // every object an entry above names

  bool named(const ObjectId& id) const {
    for (const auto& [p, h] : entries)
      if (id_of(h.entry) == id) return true;
    return false;
  }
};

Registry& registry() { return process::Context::current().get<Registry>(); }

}  // namespace

void remember(const std::string& dir, const EntryRecord& e, ObjectRecord o) {
  if (e.graph_key != o.graph_key) return;  // callers pass an entry's own object; anything else is not bundled
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const ObjectId id{o.graph_key, o.meta.checksum};
  const bool with_program = o.meta.with_program;
  r.objects.try_emplace(id, Registry::Object{std::move(o), dir});
  Registry::Held& held = r.entries[e.path];
  const std::optional<ObjectId> replaced = held.order ? std::optional(id_of(held.entry)) : std::nullopt;
  held.entry = e;
  held.entry.object_checksum = id.second;  // the bytes it ran
  held.entry.with_program = with_program;
  held.order = ++r.clock;
  if (replaced && *replaced != id && !r.named(*replaced)) r.objects.erase(*replaced);
}

Remembered remembered() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  // One object per graph key, as a store holds: of the key's entries, that
  // of the latest one naming an object with its program (a loader then
  // lowers nothing), else of the latest. The others name it too, as a
  // store's commit restamps the entries of a key it holds other bytes of
  // (they are the same computation).
  std::map<std::string, const Registry::Held*> chosen;  // graph key -> the entry whose object is bundled
  for (const auto& [p, h] : r.entries) {
    const Registry::Held*& c = chosen[h.entry.graph_key];
    if (!c || std::make_pair(h.entry.with_program, h.order) > std::make_pair(c->entry.with_program, c->order)) c = &h;
  }
  Remembered out;
  for (const auto& [key, h] : chosen) {
    const Registry::Object& o = r.objects.at(id_of(h->entry));
    out.bundle.objects.push_back(o.record);
    out.dirs[key] = o.dir;
  }
  for (const auto& [p, h] : r.entries) {
    EntryRecord e = h.entry;
    const EntryRecord& c = chosen.at(e.graph_key)->entry;
    e.object_checksum = c.object_checksum;
    e.with_program = c.with_program;
    out.bundle.entries.push_back(std::move(e));
  }
  return out;
}

}  // namespace npucache::cache
