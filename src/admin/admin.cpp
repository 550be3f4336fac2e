#include "admin/admin.h"

#include "storage/regions.h"
#include "storage/templates.h"

#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/own_key.h"
#include "cache/region_copies.h"
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
#include "storage/side_files.h"
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
#include <memory>
#include <optional>
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

}  // namespace

Listing ls(const std::string& dir, const std::vector<std::string>& models) {
  const Store s = open_store(dir);
  Listing out;
  out.dir = s.dir().string();
  const CacheStats st = read_stats(s.dir());
  const auto entries = all_entries(s, &out.problems);
  for (const auto& name : models)
    if (std::none_of(entries.begin(), entries.end(), [&](const EntryRecord& e) { return entry_of_model(e, name); }))
      throw no_such_model(name, out.dir, entries);
  for (const auto& e : entries) {
    if (!models.empty() &&
        std::none_of(models.begin(), models.end(), [&](const std::string& m) { return entry_of_model(e, m); }))
      continue;
    auto mode = e.meta.components.find(component::kMode);
    auto cls = e.meta.components.find(component::kModelClass);
    out.entries.push_back({e.path, e.graph_key, mode != e.meta.components.end() ? mode->second : "?",
                           cls != e.meta.components.end() ? cls->second : "?", file_size(s, e.graph_key),
                           entry_time(st, e)});
  }
  out.objects = s.object_keys().size();
  return out;
}

namespace {

// What one object file is, read once per phase: usable, damaged (with its
// file's identity), unread (an I/O error: unknown, never repaired) or
// missing.
struct ObjectState {
  std::optional<ObjectRecord> good;
  std::string damage;        // "" unless damaged
  std::string other_format;  // "" unless of another cache format (not damage)
  std::string unread;        // "" unless reading it failed (storage/dir.h, IoError: not damage)
  std::optional<Dir::Info> seen;
};

// How verify reports a file it could not read: a problem, not damage.
std::string unread_problem(const std::string& why) {
  return "could not be read (" + why +
         "); an I/O error is not damage, so nothing of it is repaired: run verify again when the storage answers";
}

class Objects {
 public:
  explicit Objects(const Store& s) : s_(s) {}
  ObjectState& get(const std::string& key) {
    auto [it, fresh] = m_.try_emplace(key);
    if (!fresh) return it->second;
    ObjectState& o = it->second;
    o.seen = s_.object_stat(key);
    if (!o.seen) return o;
    try {
      o.good = s_.object(key, true);
    } catch (const CacheRefused&) {
      throw;
    } catch (const format::OtherFormat& e) {
      o.other_format = e.what();
    } catch (const IoError& e) {
      o.unread = e.what();
    } catch (const CacheError& e) {
      o.damage = e.what();
    }
    return o;
  }
  static std::string state(const ObjectState& o) {
    return !o.seen                  ? "missing"
           : !o.unread.empty()      ? "unreadable (" + o.unread + ")"
           : o.other_format.empty() ? "damaged"
                                    : "of another cache format";
  }

 private:
  const Store& s_;
  std::map<std::string, ObjectState> m_;
};

// One model's index against the objects its entries use.
struct ModelCheck {
  std::string error;         // the index cannot be read at all
  std::string other_format;  // it is of another cache format (not read, not repaired)
  std::string unread;        // reading it failed (an I/O error: not damage, not repaired)
  std::optional<DecodedIndex> d;
  std::vector<std::pair<std::string, std::string>> bad;
  std::vector<std::pair<std::string, std::string>> stale;  // entries an earlier format saved
  std::vector<std::string> broken;   // entries whose object is missing, damaged or does not decode
  std::vector<EntryRecord> restamp;  // entries of an object rebuilt since they were written
  bool needs_repair() const { return d && (!d->intact || !d->hdf5_intact || !broken.empty() || !restamp.empty()); }
};

ModelCheck check_model(const Store& s, const std::string& m, Objects& objects) {
  ModelCheck c;
  try {
    c.d = s.index(m);
  } catch (const CacheRefused&) {
    throw;
  } catch (const format::OtherFormat& e) {
    c.other_format = e.what();
    return c;
  } catch (const IoError& e) {
    c.unread = e.what();
    return c;
  } catch (const CacheError& e) {
    c.error = e.what();
    return c;
  }
  if (!c.d) return c;
  const std::string where = s.index_path(m).string();
  for (const auto& p : c.d->problems) c.bad.emplace_back(where, p);
  if (!c.d->intact)
    c.bad.emplace_back(where, std::to_string(c.d->damaged) + " record(s) damaged; " +
                                  std::to_string(c.d->index.entries.size()) + " readable");
  if (!c.d->hdf5_intact) c.bad.emplace_back(where, "its HDF5 view (for h5dump) is damaged");
  for (const auto& e : c.d->index.entries) {
    if (names::earlier_format(e.meta.version)) {  // its program is an earlier encoding's
      c.stale.emplace_back(e.path, "saved by cache format " + e.meta.version + " (this build's is " +
                                       names::kFormatVersion + "): the next job of this build rebuilds it");
      continue;
    }
    std::string why;
    const ObjectState& o = objects.get(e.graph_key);
    if (!o.unread.empty()) {  // unknown: the entry is neither broken nor sound
      c.bad.emplace_back(e.path, "its object " + e.graph_key + " " + unread_problem(o.unread));
      continue;
    }
    if (!o.good) {
      why = "its object " + e.graph_key + " is " + Objects::state(o);
    } else {
      // A damaged object replaced by a rebuild has other bytes (compile
      // timings, autotune picks) for the same computation: still good.
      if (o.good->meta.checksum != e.object_checksum) {
        c.restamp.push_back(e);
        c.restamp.back().object_checksum = o.good->meta.checksum;
      }
      try {
        (void)decode(*o.good, e.parameters);
      } catch (const Error& x) {
        why = x.what();
      }
    }
    if (!why.empty()) {
      c.bad.emplace_back(e.path, why);
      c.broken.push_back(e.path);
    }
  }
  return c;
}

// Why a template is bad ("" when it is good, or its object is a later
// format's: then it is that build's).
std::string template_damage(const StoredTemplate& t, Objects& objects) {
  if (!t.damage.empty() || !t.record) return t.damage;
  const std::string& key = t.record->validity.graph_key;
  const ObjectState& o = objects.get(key);
  if (o.good || !o.other_format.empty() || !o.unread.empty()) return "";
  return "its object " + key + " is " + Objects::state(o) + ": the template can never be used";
}

}  // namespace

VerifyResult verify(const std::string& dir, bool repair, double wait_s) {
  const Store s = open_store(dir);
  VerifyResult out;
  // 1. The survey, under the store lock shared: writers go on, nothing is
  // removed meanwhile. Read in the order things name each other --
  // templates, then indexes, then the objects they name, then the object
  // listing -- so a file written meanwhile is never reported as naming a
  // missing object (an object is published before anything names it).
  std::map<std::string, ModelCheck> models;
  std::vector<std::string> damaged_objects;
  std::vector<std::string> bad_templates, bad_regions;
  {
    const Writing reading = s.writing(wait_s);
    const auto templates = stored_templates(s);
    Objects objects(s);
    for (const auto& m : s.model_infos()) models.emplace(m, check_model(s, m, objects));
    for (const auto& t : templates) {
      ++out.templates;
      if (!t.other_format.empty()) {
        out.other_format.emplace_back(t.path, t.other_format);
        continue;
      }
      if (!t.unread.empty()) {
        out.bad.emplace_back(t.path, unread_problem(t.unread));
        continue;
      }
      const std::string why = template_damage(t, objects);
      if (why.empty()) continue;
      out.bad.emplace_back(t.path, why);
      bad_templates.push_back(t.key);
    }
    // Keys this format's entries name: a later format's file under one
    // was made by hand (keys hash the format version), damage like any.
    std::set<std::string> named;
    for (const auto& [m, c] : models)
      if (c.d)
        for (const auto& e : c.d->index.entries) named.insert(e.graph_key);
    for (const auto& key : s.object_keys()) {
      ++out.objects;
      ObjectState& o = objects.get(key);
      if (!o.other_format.empty() && named.count(key)) {
        o.damage = o.other_format;
        o.other_format.clear();
      }
      if (!o.other_format.empty()) out.other_format.emplace_back(s.object_path(key).string(), o.other_format);
      if (!o.unread.empty()) out.bad.emplace_back(s.object_path(key).string(), unread_problem(o.unread));
      if (!o.damage.empty()) {
        out.bad.emplace_back(s.object_path(key).string(), o.damage);
        damaged_objects.push_back(key);
      }
    }
    for (const auto& r : stored_regions(s, true)) {
      ++out.regions;
      if (!r.other_format.empty()) out.other_format.emplace_back(r.path, r.other_format);
      if (!r.stale.empty()) out.stale.emplace_back(r.path, r.stale);
      if (!r.unread.empty()) out.bad.emplace_back(r.path, unread_problem(r.unread));
      if (r.damage.empty()) continue;
      out.bad.emplace_back(r.path, r.damage);
      if (r.ours) bad_regions.push_back(r.key);
    }
  }
  if (auto m = s.check_markers(); !m.empty()) out.bad.emplace_back(s.dir().string(), m);
  for (const auto& [m, c] : models) {
    ++out.indexes;
    if (!c.other_format.empty()) {
      out.other_format.emplace_back(s.index_path(m).string(), c.other_format);
      continue;
    }
    if (!c.unread.empty()) {
      out.bad.emplace_back(s.index_path(m).string(), unread_problem(c.unread));
      continue;
    }
    if (!c.error.empty()) {
      out.bad.emplace_back(s.index_path(m).string(),
                           c.error + "; its entries are lost (the next run re-makes them with a trace, no compile)");
      continue;
    }
    if (c.d) out.entries += c.d->index.entries.size();
    out.bad.insert(out.bad.end(), c.bad.begin(), c.bad.end());
    out.stale.insert(out.stale.end(), c.stale.begin(), c.stale.end());
  }
  if (!repair) return out;
  if (out.bad.empty()) {  // nothing to repair: only crashed writers' temporaries (their owner locks guard them)
    const std::size_t temps = s.remove_stale_temps();
    if (temps) out.repaired.push_back("removed " + std::to_string(temps) + " temporary file(s) of crashed writers");
    return out;
  }
  // 2. The repair, under the store lock exclusively: every finding is
  // checked again, now that no writer can change what it names; only what
  // is still bad is removed or rewritten.
  const Sweeping held = s.sweeping(wait_s);
  if (!s.check_markers().empty()) {
    s.heal_markers();
    out.repaired.push_back("rewrote the marker files");
  }
  Objects objects(s);
  for (const auto& [m, first] : models) {
    if (first.error.empty() && !first.needs_repair()) continue;
    const ModelCheck c = check_model(s, m, objects);
    if (!c.other_format.empty()) continue;  // replaced by another build's since: not ours to remove
    if (!c.unread.empty()) continue;        // unknown now: not removed on a failed read
    if (!c.error.empty()) {
      s.remove_index(m, held);
      out.repaired.push_back("removed unreadable index " + s.index_path(m).string());
      continue;
    }
    if (!c.needs_repair()) continue;
    s.update_index(m, c.d->index.model, c.restamp, c.broken, held);  // keeps an entry whose object was unread
    const bool gone = !s.directory().stat(names::index_file(m));
    out.repaired.push_back((gone ? "removed index " : "rewrote index ") + s.index_path(m).string() + " (" +
                           std::to_string(c.broken.size()) + " broken entries removed" +
                           (c.restamp.empty() ? ""
                                              : ", " + std::to_string(c.restamp.size()) +
                                                    " entries now record their rebuilt object's checksum") +
                           ")");
  }
  const std::set<std::string> recheck(bad_templates.begin(), bad_templates.end());
  for (const auto& t : stored_templates(s)) {
    if (!recheck.count(t.key) || template_damage(t, objects).empty()) continue;
    remove_template(s, t.key, held);
    out.repaired.push_back("removed capture template " + t.path + " (the next start captures again)");
  }
  const std::set<std::string> recheck_regions(bad_regions.begin(), bad_regions.end());
  for (const auto& r : stored_regions(s, true)) {  // an unread one has no `damage`: left
    if (!recheck_regions.count(r.key) || r.damage.empty() || !r.ours) continue;
    remove_region(s, r.key, held);
    out.repaired.push_back("removed damaged compiled region " + r.path + " (the next compile calling it compiles it)");
  }
  for (const auto& key : damaged_objects) {
    const ObjectState& o = objects.get(key);
    if (o.damage.empty() && o.other_format.empty()) continue;  // replaced by a writer since, or unread now
    s.remove_object(key, held);
    out.repaired.push_back("removed damaged object " + s.object_path(key).string());
  }
  const std::size_t temps = s.remove_stale_temps();
  if (temps) out.repaired.push_back("removed " + std::to_string(temps) + " temporary file(s) of crashed writers");
  return out;
}

Stats stats(const std::string& dir) {
  const Store s = open_store(dir);
  Stats st;
  std::vector<storage::UnreadIndex> unread;
  const auto entries = all_entries(s, nullptr, &unread);
  st.collection_blocked = storage::collection_blocked(unread);
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
    try {
      (void)s.object_meta(key);
    } catch (const format::OtherFormat&) {  // a later build's: its gc's to collect
      ++st.later_format_objects;
      continue;
    } catch (const CacheError&) {  // damaged: an orphan as any
    }
    ++st.orphans;
    st.orphan_bytes += bytes;
  }
  for (const auto& t : stored_templates(s)) {
    ++st.templates;
    st.template_bytes += t.bytes;
  }
  for (const auto& r : stored_regions(s, false)) {
    ++st.regions;
    st.region_bytes += r.bytes;
  }
  st.max_size = max_size_or_warn(dir);  // a bad setting does not hide the rest
  st.counters = read_stats(s.dir());
  return st;
}

void zero_stats(const std::string& dir) {
  open_store(dir);
  cache::zero_stats(dir);
}

namespace {

// The regions the entry's program calls and whether regions/ holds each,
// for the entry's settings (Explanation::regions).
std::vector<std::string> entry_regions(const Store& s, const EntryRecord& e) {
  std::vector<std::string> out;
  try {
    const cache::Decoded d = cache::decode(s.object(e.graph_key, false));
    if (d.graph->trace.regions.empty()) return out;
    const auto component = [&](const char* k) {
      const auto it = e.meta.components.find(k);
      return it == e.meta.components.end() ? std::string() : it->second;
    };
    format::RegionValidity v;
    v.config = d.graph->config.hash().hex();
    v.runtime_version = component(component::kRuntimeVersion);
    v.decompositions = component(component::kDecompositions);
    const std::string dynamic = component(component::kDynamic);
    v.dynamic = dynamic == "true" ? "dynamic" : dynamic == "false" ? "static" : "auto";
    v.format_version = component(component::kFormatVersion);
    std::set<std::string> stored;
    for (const auto& r : stored_regions(s, false)) stored.insert(r.key);
    for (const auto& [region, body] : d.graph->trace.regions) {
      v.region = region;
      const std::string key = format::region_key(v);
      out.push_back(region + ": " +
                    (stored.count(key) ? "in regions/ as " + key + " (a compile of another depth or layout takes it)"
                                       : "not in regions/ (the next compile calling it compiles it)"));
    }
  } catch (const Error& ex) {
    out.push_back("(its object cannot be read: " + std::string(ex.what()) + ")");
  }
  return out;
}

}  // namespace

Explanation explain(const std::string& dir, const std::string& entry) {
  const Store s = open_store(dir);
  Explanation out;
  out.entry = entry;
  if (entry.empty()) {
    const auto all = read_stats(s.dir()).recent_misses;
    out.misses = last_job_misses(all);
    if (!out.misses.empty()) out.job = out.misses.back().job;
    std::set<std::string> jobs;
    for (const auto& m : all)
      if (m.job != out.job) jobs.insert(m.job);
    out.earlier_jobs = jobs.size();
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
    out.dynamic_dims.push_back("(the profiles file is not read: " + std::string(e.what()) + ")");
  }
  if (!target && !out.pieces.empty()) return out;  // a method split at graph breaks: only its pieces
  if (!target) throw CacheError("no entry '" + entry + "' in " + dir + "; `npucache ls` lists them");
  out.regions = entry_regions(s, *target);
  std::size_t best = SIZE_MAX;
  for (const auto& e : all) {
    if (e.path == target->path) continue;
    auto diffs = differing_components(e.meta.components, target->meta.components);
    auto list = [](const EntryRecord& x) {
      const auto it = x.meta.components.find(component::kParameterList);
      return it == x.meta.components.end() ? std::string() : it->second;
    };
    if (const std::string p = first_parameter_difference(list(e), list(*target)); !p.empty())
      for (auto& d : diffs)  // the parameter that differs, not two hashes
        if (d.rfind(std::string(component::kParameterSignature) + ":", 0) == 0) d = p;
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

namespace {

// What every entry using an object says its regions are valid for: an
// import copies them under that alone; nullopt when an entry says nothing
// or two disagree.
std::optional<format::RegionValidity> agreed_validity(const std::vector<const EntryRecord*>& users) {
  std::optional<format::RegionValidity> v;
  for (const EntryRecord* e : users) {
    auto mine = region_validity_of(e->meta.components);
    if (!mine || (v && *v != *mine)) return std::nullopt;
    v = std::move(mine);
  }
  return v;
}

}  // namespace

std::set<std::string> unvouched_regions(const Store* s, const Bundle& b, const std::set<std::string>& keys) {
  std::map<std::string, std::vector<const EntryRecord*>> users;  // graph key -> the entries using it
  for (const auto& e : b.entries) users[e.graph_key].push_back(&e);
  std::set<std::string> out;
  for (const auto& o : b.objects) {
    if (!keys.count(o.graph_key)) continue;
    const auto u = users.find(o.graph_key);
    try {
      const Decoded d = u == users.end() ? decode(o) : decode(o, u->second.front()->parameters);
      if (d.graph->regions.empty()) continue;  // nothing to copy
      // Under what import_records would copy them; a check that takes
      // nothing: the region files are not marked used.
      const auto v = u == users.end() ? std::nullopt : agreed_validity(u->second);
      if (s && v && regions_held(*s, *d.graph, *v, false)) continue;
    } catch (const Error& e) {  // not decoded, a region file refused: nothing vouched for
      log::debug("the regions of object {} are not vouched for: {}", o.graph_key, e.what());
    }
    out.insert(o.graph_key);
  }
  return out;
}

Bundle read_cache(const std::string& dir, double wait_s, bool vouch) {
  const Store s = open_store(dir);
  Bundle b;
  std::set<std::string> keys;
  {
    // Shared: writers go on (what they commit meanwhile is not in the
    // bundle), nothing is removed while the entries' objects are read.
    const Writing reading = s.writing(wait_s);
    std::vector<std::string> problems;
    std::vector<storage::UnreadIndex> unread;
    b.entries = all_entries(s, &problems, &unread);
    // A later format's index is another build's: not in this format's
    // bundle, and nothing verify --repair would change.
    std::set<std::string> later;
    for (const auto& u : unread)
      if (u.cause == storage::UnreadIndex::Cause::other_format) {
        log::info("not exported: {}", u.why);
        later.insert(u.why);
      }
    for (const auto& p : problems)
      if (!later.count(p)) throw CacheError(p + "; run `npucache verify --repair " + dir + "` first");
    for (const auto& e : b.entries) keys.insert(e.graph_key);
    for (const auto& k : keys) {
      log::Progress::note("reading object " + std::to_string(b.objects.size() + 1) + " of " +
                          std::to_string(keys.size()));
      b.objects.push_back(s.object(k, true));
    }
    for (auto& t : stored_templates(s, true))
      if (t.record && keys.count(t.record->validity.graph_key)) b.templates.emplace_back(t.key, std::move(t.raw));
    // The decisions that are not programs, so a cache filled from the bundle
    // starts warm: the tuning table and the dynamic-shape profiles.
    b.tuning = stored_tuning(s);
    b.profiles = stored_profiles(s);
  }
  // After the lock: decoding the objects is the bundle's own work.
  if (vouch) b.unvouched = unvouched_regions(&s, b, keys);
  return b;
}

Transfer export_bundle(const std::string& dir, const std::string& file, double wait_s) {
  const Bundle b = read_cache(dir, wait_s);
  log::Progress::note("compressing and writing " + file);
  const std::string bytes = write_bundle(b);
  write_file_atomically(file, bytes);
  return {b.entries.size(), b.objects.size(), bytes.size(), b.templates.size(), b.tuning.size(), b.profiles.size()};
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
  std::map<std::string, std::vector<const EntryRecord*>> users;  // graph key -> the entries using it
  for (const auto& e : b.entries) users[e.graph_key].push_back(&e);
  // The objects' regions, as the validation decodes them, with what they
  // are valid for: copied into regions/ after the commit
  // (cache/region_copies.h), so that a job of another layout or depth on
  // the imported cache compiles none; not of the objects nothing vouches
  // for (Bundle::unvouched). An entry's settings are a claim of
  // the bundle's writer: taken only when the object's own trace gives its
  // key with them (the mix-up rule, cache/own_key.h), and only when every
  // entry using the object says the same.
  std::map<std::string, std::pair<compiler::CompiledGraph, format::RegionValidity>> regions;
  std::set<std::string> unvouched;  // objects with regions nothing vouches for
  validate_bundle(b, [&](const ObjectRecord& o, const std::vector<std::string>* parameters) {
    Decoded d = parameters ? decode(o, *parameters) : decode(o);
    const auto u = users.find(o.graph_key);
    if (d.graph->regions.empty() || u == users.end() || regions.count(o.graph_key)) return;
    if (b.unvouched.count(o.graph_key)) {
      unvouched.insert(o.graph_key);
      return;
    }
    for (const EntryRecord* e : u->second) {
      try {
        check_own_key(*d.graph, o.graph_key, key_inputs_of(*e, *d.graph));
      } catch (const CacheError& x) {
        log::debug("the regions of object {} are not copied: {}", o.graph_key, x.what());
        return;
      }
    }
    auto v = agreed_validity(u->second);
    if (!v) return;
    regions.emplace(o.graph_key, std::make_pair(regions_of(*d.graph), std::move(*v)));
  });
  if (!unvouched.empty())
    log::info(
        "the compiled regions of {} imported object(s) are not copied into {}/{}: nothing vouches for them (the "
        "bundle's store did not hold them, or an unsigned remote served them); the compiles that call them store "
        "them",
        unvouched.size(), dir, names::kRegionsDir);
  const Store s = Store::open(dir, Create::yes);
  log::Progress::note("writing " + std::to_string(b.objects.size()) + " objects and the indexes of " +
                      std::to_string(b.entries.size()) + " entries");
  const std::size_t objects = b.objects.size();
  // Held from before the commit until its entries' use is in stats.json:
  // a gc by age (which sweeps) sees the entries only with that use, never
  // by the bundle's dates alone.
  std::optional<Writing> until_recorded(s.writing());
  // An entry the cache holds saved after the bundle's is kept: a fill
  // never replaces what a job saved since.
  const Store::Committed done = s.commit({std::move(b.objects), std::move(b.entries), {}, true}, *until_recorded,
                                         [](const ObjectRecord& o) { (void)decode(o); });
  if (!done.kept_later.empty())
    log::info(
        "{} entr(ies) of the cache in {} were saved after the bundle's and are kept (the first: {}); `npucache "
        "gc --model` or `clear` before an import replaces them",
        done.kept_later.size(), dir, done.kept_later.front());
  // Written now: a gc by age counts from now, not from the bundle's dates.
  std::vector<std::string> written;
  for (const auto& e : done.entries) written.push_back(e.path);
  record_written(s.dir(), written);
  flush_stats();
  until_recorded.reset();
  // Regions, like templates below, only of objects still stored.
  std::size_t copied = 0;
  for (const auto& [key, r] : regions)
    if (s.object_stat(key)) copied += static_cast<std::size_t>(copy_regions(s, r.first, r.second));
  // Templates only of objects still stored (a sweep may have run since the
  // commit): one of a removed object could never be used.
  const Writing held = s.writing();
  std::size_t templates = 0;
  for (const auto& [key, file] : b.templates) {
    const TemplateRecord r = decode_template_file(file, "template " + key);
    if (!s.object_stat(r.validity.graph_key)) continue;
    put_template(s, key, file, held);
    ++templates;
  }
  const std::size_t tuning = add_tuning(s, b.tuning);
  const std::size_t dims = add_profiles(s, b.profiles);
  return {done.entries.size(), objects, 0, templates, tuning, dims, copied, done.kept_later.size()};
}

Transfer import_bundle(const std::string& file, const std::string& dir) {
  const fs::path p = fs::absolute(file);
  auto bytes = Dir::open(p.parent_path(), Safety::plain, Create::no).read(p.filename().string(), kMaxBundleFile);
  if (!bytes) throw CacheError("cannot read " + file + ": no such file");
  return import_bytes(*bytes, dir);
}

}  // namespace npucache::cache::admin
