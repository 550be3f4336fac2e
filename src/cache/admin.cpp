#include "cache/admin.h"

#include "cache/admin_templates.h"

#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/artifact.h"
#include "cache/bundle.h"
#include "cache/cache_error.h"
#include "cache/envelope.h"
#include "cache/h5.h"
#include "cache/keys.h"
#include "cache/layout.h"
#include "cache/object_file.h"
#include "cache/profile_file.h"
#include "cache/store.h"
#include "log/log.h"
#include "log/progress.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>
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

Store open_store(const std::string& dir) {
  if (!Dir::exists(dir)) throw CacheError("no cache in " + dir + " (no such directory)");
  return Store::open(dir, Create::no);
}

// Every readable entry of every index; unreadable indexes in `problems`.
std::vector<EntryRecord> all_entries(const Store& s, std::vector<std::string>* problems = nullptr) {
  std::vector<EntryRecord> out;
  for (const auto& m : s.model_infos()) {
    try {
      if (auto d = s.index(m)) {
        for (auto& e : d->index.entries) out.push_back(std::move(e));
        if (!d->intact && problems)
          problems->push_back("index " + s.index_path(m).string() + ": " + std::to_string(d->damaged) +
                              " record(s) damaged");
      }
    } catch (const CacheError& e) {
      if (problems) problems->push_back(e.what());
    }
  }
  return out;
}

std::size_t file_size(const Store& s, const std::string& key) {
  try {
    auto info = s.directory().sub(layout::kObjectsDir, Create::no).stat(layout::object_file(key));
    return info ? static_cast<std::size_t>(info->size) : 0;
  } catch (const CacheError&) {
    return 0;
  }
}

// A file is npucache's when it starts with an envelope magic: damaged
// files of ours are removed with the rest, files that only share the name
// pattern are left alone.
bool is_our_envelope(const Dir& d, const std::string& name, EnvelopeKind kind) {
  try {
    auto head = d.head(name, 8);
    return head && has_magic(kind, *head);
  } catch (const Error&) {
    return false;
  }
}

// The format-1 cache.h5 is npucache's when its root carries npucache's
// attributes (producer "npucache", format_version "1").
bool is_our_format1(const Dir& d) {
  try {
    auto bytes = d.read(layout::kFormat1File, std::size_t{64} << 30);
    if (!bytes || bytes->size() < 8 || std::memcmp(bytes->data(), "\x89HDF\r\n\x1a\n", 8) != 0) return false;
    auto guard = h5::lock();
    h5::Handle f = h5::open_image(*bytes);
    auto fixed = [&](const char* name) {
      hid_t a = H5Aopen(f.id(), name, H5P_DEFAULT);
      if (a < 0) return std::string();
      hid_t t = H5Aget_type(a);
      std::string v(H5Tget_size(t), '\0');
      H5Aread(a, t, v.data());
      H5Tclose(t);
      H5Aclose(a);
      v.resize(std::strlen(v.c_str()));
      return v;
    };
    const bool ours = fixed("producer") == "npucache" && fixed("format_version") == "1";
    H5Eclear2(H5E_DEFAULT);
    return ours;
  } catch (const Error&) {
    return false;
  }
}

double last_used(const CacheStats& s, const std::string& path) {
  auto it = s.last_used.find(path);
  return it != s.last_used.end() ? it->second : 0.0;  // never used: evicted first
}

// The objects no entry of `entries` uses, with their file sizes.
std::map<std::string, std::size_t> unreferenced(const Store& s, const std::vector<EntryRecord>& entries) {
  std::set<std::string> used;
  for (const auto& e : entries) used.insert(e.graph_key);
  std::map<std::string, std::size_t> out;
  for (const auto& key : s.object_keys())
    if (!used.count(key)) out[key] = file_size(s, key);
  return out;
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
          bool has_program = false;
          load_object(g->second, e.parameters, &has_program);
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
      const bool gone = !s.directory().stat(layout::index_file(m));
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
    const std::size_t temps = s.directory().remove_stale_temps() +
                              (s.directory().stat(layout::kObjectsDir)
                                   ? s.directory().sub(layout::kObjectsDir, Create::no).remove_stale_temps()
                                   : 0);
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
    if (auto bytes = s.directory().read(layout::kProfileFile, kMaxProfileFileBytes)) {
      const std::string model_info = layout::model_info_of(entry);
      const std::string func = entry.substr(entry.rfind('/') + 1);
      for (const auto& r : decode_profiles(*bytes, (s.dir() / layout::kProfileFile).string()))
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
  validate_bundle(b);
  const Store s = Store::open(dir, Create::yes);
  const FileLock writing = s.writing();
  std::map<std::string, std::string> stored_sum;
  for (const auto& o : b.objects) {
    log::Progress::note("writing object " + std::to_string(stored_sum.size() + 1) + " of " +
                        std::to_string(b.objects.size()));
    stored_sum[o.graph_key] = s.put_object(o).stored.meta.checksum;
  }
  std::map<std::string, std::vector<EntryRecord>> by_model;
  for (auto& e : b.entries) {
    e.object_checksum = stored_sum.at(e.graph_key);
    by_model[layout::model_info_of(e.path)].push_back(e);
  }
  for (const auto& [m, es] : by_model) {
    log::Progress::note("writing the index of " + m);
    s.update_index(m, model_components(es.front().meta.components), es, {});
  }
  for (const auto& [key, file] : b.templates) put_template(s, key, file);
  return {b.entries.size(), b.objects.size(), 0, b.templates.size()};
}

Transfer import_bundle(const std::string& file, const std::string& dir) {
  const fs::path p = fs::absolute(file);
  auto bytes = Dir::open(p.parent_path(), Safety::plain, Create::no).read(p.filename().string(), kMaxBundleFile);
  if (!bytes) throw CacheError("cannot read " + file + ": no such file");
  return import_bytes(*bytes, dir);
}

std::size_t parse_size(const std::string& text) {
  auto bad = [&]() {
    return ConfigError("size '" + text +
                       "' is not a size: give a number of bytes with an optional unit K, M, G or T "
                       "(powers of 1024), e.g. 64M or 1.5G");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string unit = text.substr(i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".") throw bad();
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, double> units = {{"", 1.0},       {"B", 1.0},     {"K", 0x1p10},   {"KB", 0x1p10},
                                                      {"KIB", 0x1p10}, {"M", 0x1p20},  {"MB", 0x1p20},  {"MIB", 0x1p20},
                                                      {"G", 0x1p30},   {"GB", 0x1p30}, {"GIB", 0x1p30}, {"T", 0x1p40},
                                                      {"TB", 0x1p40},  {"TIB", 0x1p40}};
  auto u = units.find(unit);
  if (u == units.end()) throw bad();
  const double v = std::stod(number) * u->second;
  if (!std::isfinite(v) || v < 0 || v >= 0x1p62)
    throw ConfigError("size '" + text + "' is out of range (at most 4 EiB)");
  return static_cast<std::size_t>(v);
}

std::string format_size(std::size_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::optional<std::size_t> max_size(const std::string& dir) {
  if (!Dir::exists(dir)) return std::nullopt;
  auto text = Dir::open(dir, Safety::cache, Create::no).read(layout::kConfigFile, kMaxConfigBytes);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    log::warn("{}/{} is damaged; no size limit applies until `npucache config max-size` sets one", dir,
              layout::kConfigFile);
    return std::nullopt;
  }
  auto it = j.find("max_size");
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::size_t>();
}

void set_max_size(const std::string& dir, std::optional<std::size_t> limit) {
  const Store s = Store::open(dir, Create::yes);
  nlohmann::json j = nlohmann::json::object();
  if (limit) j["max_size"] = *limit;
  s.directory().write(layout::kConfigFile, j.dump() + "\n");
}

void enforce_limit(const std::string& dir, const std::vector<std::string>& written) {
  const auto limit = max_size(dir);
  if (!limit) return;
  const GcResult g = gc(dir, *limit, written);
  if (g.evicted_entries > 0)
    log::info("cache {} over its limit {}: evicted {} layout(s) ({} entries), {} object(s)", dir, format_size(*limit),
              g.evicted_layouts, g.evicted_entries, g.removed_objects);
}

namespace {

// Removes the entries `removals` names (model_info -> entry paths) from
// their indexes, then every object no remaining entry uses (objects
// orphaned before are counted in orphaned_*), then templates of removed
// objects. Runs under the sweeping lock (no writer between an object and
// its index).
void evict_and_sweep(const Store& s, const std::map<std::string, std::vector<std::string>>& removals,
                     const std::map<std::string, std::size_t>& orphans_before, GcResult& out) {
  std::vector<std::string> removed_paths;
  for (const auto& [m, paths] : removals) {
    auto d = s.index(m);
    s.update_index(m, d ? d->index.model : Components{}, {}, paths);
    removed_paths.insert(removed_paths.end(), paths.begin(), paths.end());
  }
  if (!removed_paths.empty()) forget_entries(s.dir(), removed_paths);
  // Objects no remaining entry uses (including ones never referenced).
  std::set<std::string> used;
  for (const auto& e : all_entries(s)) used.insert(e.graph_key);
  const bool have_objects = s.directory().stat(layout::kObjectsDir).has_value();
  for (const auto& key : s.object_keys()) {
    if (used.count(key)) continue;
    const Dir objects = s.directory().sub(layout::kObjectsDir, Create::no);
    if (!have_objects || !is_our_envelope(objects, layout::object_file(key), EnvelopeKind::object)) {
      out.left.push_back(s.object_path(key).string());
      continue;
    }
    s.remove_object(key);
    ++out.removed_objects;
    if (const auto o = orphans_before.find(key); o != orphans_before.end()) {
      ++out.orphaned_objects;
      out.orphaned_bytes += o->second;
    }
  }
  if (have_objects) s.directory().sub(layout::kObjectsDir, Create::no).remove_stale_temps();
  const auto keys = s.object_keys();
  out.removed_templates = sweep_templates(s, std::set<std::string>(keys.begin(), keys.end()));
  std::size_t total = 0;
  for (const auto& e : all_entries(s))
    if (used.erase(e.graph_key)) total += file_size(s, e.graph_key);
  out.remaining_bytes = total;
}

// The class part of a model_info ("npucache.models.Decoder" of
// "npucache.models.Decoder_dynamic_8efea6fcd2ba234c").
std::string model_info_class(const std::string& model_info) {
  for (const char* kind : {"_dynamic_", "_static_", "_auto_"})
    if (const auto at = model_info.rfind(kind); at != std::string::npos) return model_info.substr(0, at);
  return model_info;
}

// When the entry was last used (saved or served): stats.json's record, else
// its ModelCacheMeta date; nullopt when neither is known.
std::optional<double> entry_time(const CacheStats& st, const EntryRecord& e) {
  if (const double t = last_used(st, e.path); t > 0) return t;
  std::tm tm{};
  if (strptime(e.meta.date.c_str(), "%Y-%m-%d %H:%M:%S", &tm) == nullptr) return std::nullopt;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<double>(t);
}

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

GcResult gc(const std::string& dir, std::size_t limit, const std::vector<std::string>& keep) {
  GcOptions o;
  o.max_size = limit;
  return gc(dir, o, keep);
}

GcResult gc(const std::string& dir, const GcOptions& options, const std::vector<std::string>& keep) {
  const Store s = open_store(dir);
  const FileLock sweeping = s.sweeping();  // no writer between its objects and its index
  GcResult out;
  out.limit = options.max_size.value_or(0);
  const CacheStats st = read_stats(s.dir());
  const auto entries = all_entries(s, &out.problems);
  out.entries = entries.size();
  const auto orphans_before = unreferenced(s, entries);
  const std::set<std::string> fresh(keep.begin(), keep.end());
  std::map<std::string, std::vector<std::string>> removals;  // model_info -> entry paths
  std::set<std::string> removed;                             // entry paths
  std::set<std::pair<std::string, int>> evicted_layouts;
  const auto evict = [&](const EntryRecord& e) {
    if (fresh.count(e.path) || !removed.insert(e.path).second) return;
    removals[e.meta.model_info].push_back(e.path);
    evicted_layouts.insert({e.meta.model_info, e.meta.rank.world_size});
    ++out.evicted_entries;
  };
  // 1. One model: every stage file of its class, or one model_info.
  for (const auto& name : options.models) {
    std::size_t matched = 0;
    for (const auto& e : entries) {
      const auto cls = e.meta.components.find(component::kModelClass);
      if (e.meta.model_info == name || model_info_class(e.meta.model_info) == name ||
          (cls != e.meta.components.end() && cls->second == name)) {
        ++matched;
        evict(e);
      }
    }
    if (matched == 0) {
      std::set<std::string> known;
      for (const auto& e : entries) known.insert(model_info_class(e.meta.model_info));
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw ConfigError("--model '" + name + "': no entry of that model in " + s.dir().string() +
                        (list.empty() ? std::string(" (it has no entries)")
                                      : "; its models are: " + list + " (or one model_info as `npucache ls` prints)"));
    }
  }
  // 2. By age: entries last used (saved or served) longer ago than that.
  if (options.older_than_s) {
    const double cutoff = now_s() - *options.older_than_s;
    for (const auto& e : entries)
      if (const auto t = entry_time(st, e); t && *t < cutoff) evict(e);
  }
  // 3. By size: whole layouts (model_info, world size), least recently used
  // first, until the objects the remaining entries use fit.
  if (options.max_size) {
    struct Layout {
      std::string model_info;
      double used = 0;
      bool fresh = false;  // holds an entry just written: never evicted
      std::vector<const EntryRecord*> entries;
    };
    std::map<std::pair<std::string, int>, Layout> layouts;
    std::map<std::string, int> refs;
    std::size_t total = 0;
    for (const auto& e : entries) {
      if (removed.count(e.path)) continue;
      Layout& l = layouts[{e.meta.model_info, e.meta.rank.world_size}];
      l.model_info = e.meta.model_info;
      l.used = std::max(l.used, last_used(st, e.path));
      l.fresh = l.fresh || fresh.count(e.path) > 0;
      l.entries.push_back(&e);
      if (refs[e.graph_key]++ == 0) total += file_size(s, e.graph_key);
    }
    std::vector<Layout*> order;
    for (auto& [k, l] : layouts) order.push_back(&l);
    std::stable_sort(order.begin(), order.end(), [](const Layout* a, const Layout* b) { return a->used < b->used; });
    for (Layout* l : order) {
      if (total <= *options.max_size) break;
      if (l->fresh) continue;
      for (const EntryRecord* e : l->entries) {
        evict(*e);
        if (--refs[e->graph_key] == 0) total -= file_size(s, e->graph_key);
      }
    }
  }
  out.evicted_layouts = evicted_layouts.size();
  evict_and_sweep(s, removals, orphans_before, out);
  return out;
}

Orphans orphans(const std::string& dir) {
  const Store s = open_store(dir);
  Orphans out;
  for (const auto& [key, bytes] : unreferenced(s, all_entries(s))) {
    out.objects.push_back(key);
    out.bytes += bytes;
  }
  return out;
}

double parse_age(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  static const std::map<std::string, double> kUnits = {{"s", 1},    {"m", 60},    {"min", 60},
                                                       {"h", 3600}, {"d", 86400}, {"w", 604800}};
  const auto u = kUnits.find(unit);
  if (text.empty() || end == text.c_str() || u == kUnits.end() || !std::isfinite(v) || v < 0)
    throw ConfigError("'" + text +
                      "' is not an age: give a number with a unit, s, m (or min), h, d or w, e.g. 36h or 7d");
  return v * u->second;
}

ClearResult clear(const std::string& dir) {
  ClearResult out;
  if (!Dir::exists(dir)) return out;  // nothing there, nothing created
  const Dir d = Dir::open(dir, Safety::cache, Create::no);
  std::vector<std::string> names = d.list();
  for (const auto& n : names) {
    const bool temp = layout::temp_owner_any(n) > 0;
    bool ours = temp;
    if (n == layout::kStatsFile || n == layout::kConfigFile || n == layout::kStoreFile || n == layout::kCacheDirTag)
      ours = true;
    else if (!layout::index_model_info(n).empty())
      ours = is_our_envelope(d, n, EnvelopeKind::index);
    else if (n == layout::kTuningFile)
      ours = is_our_envelope(d, n, EnvelopeKind::tuning);
    else if (n == layout::kProfileFile)
      ours = is_our_envelope(d, n, EnvelopeKind::profile);
    else if (n == layout::kFormat1File)
      ours = is_our_format1(d);
    if (n == layout::kObjectsDir || n == layout::kLocksDir || n == layout::kTemplatesDir) continue;
    if (ours) {
      out.had_cache = out.had_cache || !temp;
      d.remove(n);
      ++out.removed;
    } else {
      out.left.push_back((d.path() / n).string());
    }
  }
  for (const char* sub : {layout::kObjectsDir, layout::kTemplatesDir, layout::kLocksDir}) {
    auto info = d.stat(sub);
    if (!info) continue;
    const Dir s = d.sub(sub, Create::no);
    bool empty = true;
    for (const auto& n : s.list()) {
      const std::string where = sub;
      const bool ours =
          where == layout::kLocksDir ? (n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0)
          : where == layout::kTemplatesDir
              ? (!layout::template_key_of(n).empty() && is_our_envelope(s, n, EnvelopeKind::capture_template)) ||
                    layout::temp_owner_any(n) > 0
              : (!layout::object_key(n).empty() && is_our_envelope(s, n, EnvelopeKind::object)) ||
                    layout::temp_owner_any(n) > 0;
      if (ours) {
        s.remove(n);
        ++out.removed;
        out.had_cache = true;
      } else {
        out.left.push_back((s.path() / n).string());
        empty = false;
      }
    }
    if (empty && ::unlinkat(d.fd(), sub, AT_REMOVEDIR) != 0) out.left.push_back((d.path() / sub).string());
  }
  return out;
}

}  // namespace npucache::cache::admin
