#include "admin/admin.h"

#include "storage/templates.h"

#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/runnable.h"
#include "format/artifact.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/object_file.h"
#include "format/profile_file.h"
#include "h5/h5.h"
#include "log/log.h"
#include "log/progress.h"
#include "storage/store.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

namespace npucache::cache::admin {
namespace fs = std::filesystem;
namespace {

// 64 KiB: config.json holds one setting.
constexpr std::size_t kMaxConfigBytes = std::size_t{64} << 10;
// Bundles larger than this are refused before they are read.
constexpr std::size_t kMaxBundleFile = std::size_t{4} << 30;

// The method cache's decode (cache/runnable.h), as a bundle's check.
void decodes(const ObjectRecord& o, const std::vector<std::string>* parameters) {
  (void)(parameters ? decode(o, *parameters) : decode(o));
}

Store open_store(const std::string& dir) {
  if (!Dir::exists(dir)) throw CacheError("no cache in " + dir + " (no such directory)");
  return Store::open(dir, Create::no);
}

// The format-1 cache.h5 is npucache's when its root carries npucache's
// attributes (producer "npucache", format_version "1").
bool is_our_format1(const Dir& d) {
  try {
    auto bytes = d.read(names::kFormat1File, std::size_t{64} << 30);
    if (!bytes || bytes->size() < 8 || std::memcmp(bytes->data(), "\x89HDF\r\n\x1a\n", 8) != 0) return false;
    auto guard = h5::lock();
    h5::Handle f = h5::open_image(*bytes);
    const bool ours = h5::read_fixed_string_attr(f.id(), "producer") == "npucache" &&
                      h5::read_fixed_string_attr(f.id(), "format_version") == "1";
    return ours;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

Listing ls(const std::string& dir) {
  const Store s = open_store(dir);
  Listing out;
  out.dir = s.dir().string();
  for (const auto& e : all_entries(s, &out.problems)) {
    auto mode = e.meta.components.find(component::kMode);
    auto cls = e.meta.components.find(component::kModelClass);
    out.entries.push_back({e.path, e.graph_key, mode != e.meta.components.end() ? mode->second : "?",
                           cls != e.meta.components.end() ? cls->second : "?", file_size(s, e.graph_key)});
  }
  out.objects = s.object_keys().size();
  return out;
}

VerifyResult verify(const std::string& dir, bool repair) {
  const Store s = open_store(dir);
  VerifyResult out;
  if (auto m = s.check_markers(); !m.empty()) {
    out.bad.emplace_back(s.dir().string(), m);
    if (repair) {
      s.heal_markers();
      out.repaired.push_back("rewrote the marker files");
    }
  }
  std::map<std::string, std::string> damaged_objects;  // key -> what is wrong
  std::map<std::string, ObjectRecord> good_objects;
  for (const auto& key : s.object_keys()) {
    ++out.objects;
    try {
      good_objects.emplace(key, s.object(key, true));
    } catch (const CacheRefused&) {
      throw;
    } catch (const CacheError& e) {
      damaged_objects[key] = e.what();
      out.bad.emplace_back(s.object_path(key).string(), e.what());
    }
  }
  for (const auto& m : s.model_infos()) {
    ++out.indexes;
    std::optional<DecodedIndex> d;
    try {
      d = s.index(m);
    } catch (const CacheRefused&) {
      throw;
    } catch (const CacheError& e) {
      out.bad.emplace_back(s.index_path(m).string(), std::string(e.what()) +
                                                         "; its entries are lost (the next "
                                                         "run re-makes them with a trace, no compile)");
      if (repair) {
        s.remove_index(m);
        out.repaired.push_back("removed unreadable index " + s.index_path(m).string());
      }
      continue;
    }
    if (!d) continue;
    for (const auto& p : d->problems) out.bad.emplace_back(s.index_path(m).string(), p);
    if (!d->intact)
      out.bad.emplace_back(s.index_path(m).string(), std::to_string(d->damaged) + " record(s) damaged; " +
                                                         std::to_string(d->index.entries.size()) + " readable");
    if (!d->hdf5_intact) out.bad.emplace_back(s.index_path(m).string(), "its HDF5 view (for h5dump) is damaged");
    std::vector<std::string> broken;
    std::vector<EntryRecord> restamp;  // entries of an object rebuilt since they were written
    for (const auto& e : d->index.entries) {
      ++out.entries;
      std::string why;
      if (auto it = damaged_objects.find(e.graph_key); it != damaged_objects.end()) {
        why = "its object " + e.graph_key + " is damaged";
      } else if (auto g = good_objects.find(e.graph_key); g == good_objects.end()) {
        why = "its object " + e.graph_key + " is missing";
      } else {
        // A damaged object replaced by a rebuild has other bytes (compile
        // timings, autotune picks) for the same computation: still good.
        if (g->second.meta.checksum != e.object_checksum) {
          restamp.push_back(e);
          restamp.back().object_checksum = g->second.meta.checksum;
        }
        try {
          (void)decode(g->second, e.parameters);
        } catch (const Error& x) {
          why = x.what();
        }
      }
      if (!why.empty()) {
        out.bad.emplace_back(e.path, why);
        broken.push_back(e.path);
      }
    }
    if (repair && (!d->intact || !d->hdf5_intact || !broken.empty() || !restamp.empty())) {
      s.update_index(m, d->index.model, restamp, broken);
      const bool gone = !s.directory().stat(names::index_file(m));
      out.repaired.push_back((gone ? "removed index " : "rewrote index ") + s.index_path(m).string() + " (" +
                             std::to_string(broken.size()) + " broken entries removed" +
                             (restamp.empty() ? ""
                                              : ", " + std::to_string(restamp.size()) +
                                                    " entries now record their rebuilt object's checksum") +
                             ")");
    }
  }
  for (const auto& t : stored_templates(s)) {
    ++out.templates;
    std::string why = t.damage;
    if (t.record && !good_objects.count(t.record->validity.graph_key))
      why = "its object " + t.record->validity.graph_key + " is " +
            (damaged_objects.count(t.record->validity.graph_key) ? "damaged" : "missing") +
            ": the template can never be used";
    if (why.empty()) continue;
    out.bad.emplace_back(t.path, why);
    if (repair) {
      remove_template(s, t.key);
      out.repaired.push_back("removed capture template " + t.path + " (the next start captures again)");
    }
  }
  if (repair) {
    for (const auto& [key, why] : damaged_objects) {
      s.remove_object(key);
      out.repaired.push_back("removed damaged object " + s.object_path(key).string());
    }
    std::size_t temps = s.directory().remove_stale_temps();
    for (const char* sub : {names::kObjectsDir, names::kDeltasDir})
      if (s.directory().stat(sub)) temps += s.directory().sub(sub, Create::no).remove_stale_temps();
    if (temps) out.repaired.push_back("removed " + std::to_string(temps) + " temporary file(s) of crashed writers");
  }
  return out;
}

Stats stats(const std::string& dir) {
  const Store s = open_store(dir);
  Stats st;
  const auto entries = all_entries(s);
  st.entries = entries.size();
  for (const auto& key : s.object_keys()) {
    ++st.objects;
    st.stored_bytes += file_size(s, key);
    try {
      st.raw_bytes += s.object_meta(key).raw_size;
    } catch (const CacheError&) {
    }
  }
  for (const auto& [key, bytes] : unreferenced(s, entries)) {
    ++st.orphans;
    st.orphan_bytes += bytes;
  }
  for (const auto& t : stored_templates(s)) {
    ++st.templates;
    st.template_bytes += t.bytes;
  }
  st.max_size = max_size(dir);
  st.counters = read_stats(s.dir());
  return st;
}

void zero_stats(const std::string& dir) {
  open_store(dir);
  cache::zero_stats(dir);
}

Explanation explain(const std::string& dir, const std::string& entry) {
  const Store s = open_store(dir);
  Explanation out;
  out.entry = entry;
  if (entry.empty()) {
    out.misses = read_stats(s.dir()).recent_misses;
    return out;
  }
  const auto all = all_entries(s);
  const EntryRecord* target = nullptr;
  const std::string piece_prefix = entry + ".piece-";
  for (const auto& e : all) {
    if (e.path == entry) target = &e;
    if (e.path.compare(0, piece_prefix.size(), piece_prefix) == 0) out.pieces.push_back(e.path);
  }
  std::sort(out.pieces.begin(), out.pieces.end());
  try {
    if (auto bytes = s.directory().read(names::kProfileFile, kMaxProfileFileBytes)) {
      const std::string model_info = names::model_info_of(entry);
      const std::string func = entry.substr(entry.rfind('/') + 1);
      for (const auto& r : decode_profiles(*bytes, (s.dir() / names::kProfileFile).string()))
        if (r.model_info == model_info && r.method == func)
          out.dynamic_dims.push_back(r.dim.input + " dim " + std::to_string(r.dim.dim));
    }
  } catch (const CacheError& e) {
    out.dynamic_dims.push_back("(the profiles file is damaged: " + std::string(e.what()) + ")");
  }
  if (!target && !out.pieces.empty()) return out;  // a method split at graph breaks: only its pieces
  if (!target) throw CacheError("no entry '" + entry + "' in " + dir + "; `npucache ls` lists them");
  std::size_t best = SIZE_MAX;
  for (const auto& e : all) {
    if (e.path == target->path) continue;
    auto diffs = differing_components(e.meta.components, target->meta.components);
    if (e.graph_key != target->graph_key)
      diffs.push_back("graph_key: stored '" + e.graph_key + "', here '" + target->graph_key + "'");
    if (diffs.size() < best) {
      best = diffs.size();
      out.nearest = e.path;
      out.differences = std::move(diffs);
    }
  }
  return out;
}

Bundle read_cache(const std::string& dir) {
  const Store s = open_store(dir);
  Bundle b;
  std::vector<std::string> problems;
  b.entries = all_entries(s, &problems);
  if (!problems.empty()) throw CacheError(problems.front() + "; run `npucache verify --repair " + dir + "` first");
  std::set<std::string> keys;
  for (const auto& e : b.entries) keys.insert(e.graph_key);
  for (const auto& k : keys) {
    log::Progress::note("reading object " + std::to_string(b.objects.size() + 1) + " of " +
                        std::to_string(keys.size()));
    b.objects.push_back(s.object(k, true));
  }
  for (auto& t : stored_templates(s, true))
    if (t.record && keys.count(t.record->validity.graph_key)) b.templates.emplace_back(t.key, std::move(t.raw));
  return b;
}

Transfer export_bundle(const std::string& dir, const std::string& file) {
  const Bundle b = read_cache(dir);
  log::Progress::note("compressing and writing " + file);
  const std::string bytes = write_bundle(b);
  write_file_atomically(file, bytes);
  return {b.entries.size(), b.objects.size(), bytes.size(), b.templates.size()};
}

Transfer import_bytes(std::string_view bytes, const std::string& dir) {
  log::Progress::note("decompressing");
  Transfer t = import_records(read_bundle(bytes), dir);
  t.bytes = bytes.size();
  return t;
}

Transfer import_records(Bundle b, const std::string& dir) {
  log::Progress::note("validating " + std::to_string(b.objects.size()) + " objects and " +
                      std::to_string(b.entries.size()) + " entries");
  validate_bundle(b, decodes);
  const Store s = Store::open(dir, Create::yes);
  log::Progress::note("writing " + std::to_string(b.objects.size()) + " objects and the indexes of " +
                      std::to_string(b.entries.size()) + " entries");
  const std::size_t entries = b.entries.size(), objects = b.objects.size();
  (void)s.commit({std::move(b.objects), std::move(b.entries)}, [](const ObjectRecord& o) { (void)decode(o); });
  for (const auto& [key, file] : b.templates) put_template(s, key, file);
  return {entries, objects, 0, b.templates.size()};
}

Transfer import_bundle(const std::string& file, const std::string& dir) {
  const fs::path p = fs::absolute(file);
  auto bytes = Dir::open(p.parent_path(), Safety::plain, Create::no).read(p.filename().string(), kMaxBundleFile);
  if (!bytes) throw CacheError("cannot read " + file + ": no such file");
  return import_bytes(*bytes, dir);
}

ClearResult clear(const std::string& dir) {
  ClearResult out;
  if (!Dir::exists(dir)) return out;  // nothing there, nothing created
  const Dir d = Dir::open(dir, Safety::cache, Create::no);
  std::vector<std::string> names = d.list();
  for (const auto& n : names) {
    const bool temp = names::temp_owner_any(n) > 0;
    bool ours = temp;
    if (n == names::kStatsFile || n == names::kConfigFile || n == names::kStoreFile || n == names::kCacheDirTag)
      ours = true;
    else if (!names::index_model_info(n).empty())
      ours = is_our_envelope(d, n, EnvelopeKind::index);
    else if (n == names::kTuningFile)
      ours = is_our_envelope(d, n, EnvelopeKind::tuning);
    else if (n == names::kProfileFile)
      ours = is_our_envelope(d, n, EnvelopeKind::profile);
    else if (n == names::kFormat1File)
      ours = is_our_format1(d);
    if (n == names::kObjectsDir || n == names::kLocksDir || n == names::kTemplatesDir || n == names::kDeltasDir)
      continue;
    if (ours) {
      out.had_cache = out.had_cache || !temp;
      d.remove(n);
      ++out.removed;
    } else {
      out.left.push_back((d.path() / n).string());
    }
  }
  for (const char* sub : {names::kObjectsDir, names::kTemplatesDir, names::kDeltasDir, names::kLocksDir}) {
    auto info = d.stat(sub);
    if (!info) continue;
    const Dir s = d.sub(sub, Create::no);
    bool empty = true;
    for (const auto& n : s.list()) {
      const std::string where = sub;
      const bool ours =
          where == names::kLocksDir ? (n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0)
          : where == names::kDeltasDir
              ? (!names::delta_of(n).first.empty() && is_our_envelope(s, n, EnvelopeKind::index)) ||
                    names::temp_owner_any(n) > 0
          : where == names::kTemplatesDir
              ? (!names::template_key_of(n).empty() && is_our_envelope(s, n, EnvelopeKind::capture_template)) ||
                    names::temp_owner_any(n) > 0
              : (!names::object_key(n).empty() && is_our_envelope(s, n, EnvelopeKind::object)) ||
                    names::temp_owner_any(n) > 0;
      if (ours) {
        s.remove(n);
        ++out.removed;
        out.had_cache = true;
      } else {
        out.left.push_back((s.path() / n).string());
        empty = false;
      }
    }
    if (empty && !d.remove_empty_dir(sub)) out.left.push_back((d.path() / sub).string());
  }
  return out;
}

}  // namespace npucache::cache::admin
