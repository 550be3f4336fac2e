#include "cache/admin.h"

#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/artifact.h"
#include "cache/atomic_file.h"
#include "cache/bundle.h"
#include "cache/cache_error.h"
#include "cache/keys.h"
#include "cache/layout.h"
#include "cache/store.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <sstream>

namespace npucache::cache::admin {
namespace {

Hdf5Store::Reader open_reader(const Hdf5Store& store) {
  auto r = store.reader();
  if (!r) throw CacheError("no cache in " + store.dir().string() + " (no " + layout::kCacheFile + ")");
  return std::move(*r);
}

}  // namespace

Listing ls(const std::string& dir) {
  Hdf5Store store(dir);
  auto r = open_reader(store);
  Listing out;
  out.file = store.file().string();
  for (const auto& e : r.entries()) {
    auto mode = e.meta.components.find(component::kMode);
    out.entries.push_back({e.path, e.graph_key, mode != e.meta.components.end() ? mode->second : "?",
                           r.stored_bytes(e.graph_key)});
  }
  out.objects = r.objects().size();
  return out;
}

VerifyResult verify(const std::string& dir) {
  Hdf5Store store(dir);
  auto r = open_reader(store);
  VerifyResult out;
  for (const auto& e : r.entries()) {
    ++out.checked;
    try {
      ObjectRecord o = r.object(e.graph_key);  // checksum
      bool has_program = false;
      load_object(o, e.parameters, &has_program);  // decodes
      if (!e.object.checksum.empty() && e.object.checksum != o.meta.checksum)
        throw CacheError("entry checksum differs from its object's");
    } catch (const Error& ex) {
      out.bad.emplace_back(e.path, ex.what());
    }
  }
  return out;
}

Stats stats(const std::string& dir) {
  Hdf5Store store(dir);
  auto r = open_reader(store);
  Stats s;
  const auto objects = r.objects();
  for (const auto& k : objects) {
    s.stored_bytes += r.stored_bytes(k);
    s.raw_bytes += r.object(k, false).raw.size();
  }
  s.objects = objects.size();
  s.entries = r.entries().size();
  s.counters = read_stats(store.dir());
  return s;
}

Explanation explain(const std::string& dir, const std::string& entry) {
  Hdf5Store store(dir);
  Explanation out;
  out.entry = entry;
  if (entry.empty()) {
    out.misses = read_stats(store.dir()).recent_misses;
    return out;
  }
  auto r = open_reader(store);
  auto target = r.entry(entry);
  if (!target) throw CacheError("no entry '" + entry + "'; `npucache ls` lists them");
  std::size_t best = SIZE_MAX;
  for (const auto& e : r.entries()) {
    if (e.path == target->path) continue;
    auto diffs = differing_components(e.meta.components, target->meta.components);
    if (diffs.size() < best) {
      best = diffs.size();
      out.nearest = e.path;
      out.differences = std::move(diffs);
    }
  }
  return out;
}

Transfer export_bundle(const std::string& dir, const std::string& file) {
  Hdf5Store store(dir);
  auto r = open_reader(store);
  Bundle b;
  b.entries = r.entries();
  for (const auto& k : r.objects()) b.objects.push_back(r.object(k));
  const std::string bytes = write_bundle(b);
  write_file_atomically(file, bytes);
  return {b.entries.size(), b.objects.size(), bytes.size()};
}

Transfer import_bundle(const std::string& file, const std::string& dir) {
  std::ifstream f(file, std::ios::binary);
  if (!f) throw CacheError("cannot read " + file);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  load_cache_artifacts(bytes, dir);
  const Bundle b = read_bundle(bytes);
  return {b.entries.size(), b.objects.size(), bytes.size()};
}

std::size_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string unit = s.substr(pos);
  std::transform(unit.begin(), unit.end(), unit.begin(), ::toupper);
  const double mult = unit.empty() || unit == "B"        ? 1
                      : unit == "K" || unit == "KB"      ? 1024.0
                      : unit == "M" || unit == "MB"      ? 1024.0 * 1024
                      : unit == "G" || unit == "GB"      ? 1024.0 * 1024 * 1024
                                                         : -1;
  if (pos == 0 || mult < 0 || v < 0) throw ConfigError("size '" + s + "' is not a size; use bytes or K/M/G, e.g. 64M");
  return static_cast<std::size_t>(v * mult);
}

GcResult gc(const std::string& dir, std::size_t limit) {
  Hdf5Store store(dir);
  auto r = open_reader(store);
  auto entries = r.entries();
  const CacheStats s = read_stats(store.dir());
  auto last_used = [&](const EntryRecord& e) {
    auto it = s.last_used.find(e.path);
    return it != s.last_used.end() ? it->second : 0.0;  // never used: evicted first
  };
  std::sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) { return last_used(a) < last_used(b); });
  std::map<std::string, int> refs;
  std::map<std::string, std::size_t> size;
  GcResult out;
  out.limit = limit;
  out.entries = entries.size();
  std::size_t total = 0;
  for (const auto& e : entries)
    if (refs[e.graph_key]++ == 0) total += size[e.graph_key] = r.stored_bytes(e.graph_key);
  Hdf5Store::Transaction t;
  t.drop_unreferenced_objects = true;
  for (const auto& e : entries) {
    if (total <= limit) break;
    t.remove_entries.push_back(e.path);
    if (--refs[e.graph_key] == 0) total -= size[e.graph_key];
  }
  store.commit(t);
  forget_entries(store.dir(), t.remove_entries);
  out.evicted = t.remove_entries.size();
  out.remaining_bytes = total;
  return out;
}

void clear(const std::string& dir) {
  Hdf5Store store(dir);
  store.clear();
  clear_stats(store.dir());
}

}  // namespace npucache::cache::admin
