#include "cache/method_cache.h"

#include "cache/explain.h"
#include "cache/layout.h"
#include "cache/own_key.h"
#include "cache/region_copies.h"
#include "cache/region_library.h"
#include "cache/registry.h"
#include "cache/runnable.h"
#include "cache/template_store.h"
#include "compiler/serialize.h"
#include "compiler/tuning_table.h"
#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "storage/commit_queue.h"
#include "storage/gc.h"
#include "storage/live_uses.h"
#include "storage/regions.h"
#include "storage/remote_tier.h"
#include "storage/stats.h"
#include "storage/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <tuple>
#include "log/log.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "process/env.h"
#include "process/once.h"

namespace npucache::cache {
namespace {

// The symbolic dims of a trace's tensor inputs (automatic dynamic makes
// dims symbolic; it never makes them concrete again).
std::size_t symbolic_dims(const TraceResult& t) {
  std::size_t n = 0;
  for (const auto& in : t.signature.inputs)
    for (const auto& d : in.type.shape) n += !d.is_constant();
  return n;
}

// When this process began using caches (its first MethodCache): entries
// dated later were written by this job (another method, a rank ahead), so
// they tell nothing of the layouts before it.
const std::string& process_began() {
  static const auto* began = new std::string(now_string());  // never destroyed: read by commits at exit
  return *began;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

// A rank's line for an entry loaded, saved or reused: info, debug when a
// coordinator summarises them (MethodIdentity::summarised).
template <class... A>
void entry_line(bool summarised, spdlog::format_string_t<A...> fmt, A&&... args) {
  log::clear_progress_line();
  log::get().log(summarised ? spdlog::level::debug : spdlog::level::info, fmt, std::forward<A>(args)...);
}

}  // namespace

std::shared_ptr<compiler::TemplateStore> MethodCache::templates(const std::string& graph_key) const {
  return std::make_shared<CachedTemplates>(id_.dir, graph_key, id_.key.runtime_version, remote_,
                                           [self = *this](Create c) { return self.store(c); });
}

std::shared_ptr<MethodCache> MethodCache::for_method(const std::string& method) const {
  MethodIdentity id = id_;
  id.key.method = method;
  return std::make_shared<MethodCache>(std::move(id));
}

MethodCache::MethodCache(MethodIdentity id)
    : id_(std::move(id)),
      key_(lookup_key(id_.key)),
      path_(names::entry_path(key_.model_info, id_.key.method, id_.who.world_size, id_.who.global_rank)),
      remote_(RemoteTier::get(id_.remote)),
      side_(id_.dir, remote_),
      open_(std::make_shared<OpenStore>()) {
  (void)process_began();
  if (!names::valid_name(id_.key.method))
    throw ConfigError("method name '" + id_.key.method +
                      "' cannot name a cache entry: use letters, digits, '_', "
                      "'.' and '-' (not starting with '.'), e.g. CompileOptions::method_name = \"prompt\"");
  if (!names::valid_entry_path(path_))
    throw ConfigError("cache entry path '" + path_ + "' is malformed (world size " +
                      std::to_string(id_.who.world_size) + ", rank " + std::to_string(id_.who.global_rank) + ")");
}

std::string MethodCache::where() const { return (std::filesystem::path(id_.dir) / path_).string(); }

std::string MethodCache::module_path() const {
  return (std::filesystem::path(id_.dir) / path_ / names::kModuleDataset).string();
}

std::string MethodCache::Lookup::reason_text() const {
  std::string s(miss_reason_name(reason));
  if (!differences.empty()) s += " (" + join(differences) + ")";
  return s;
}

std::string MethodCache::Lookup::cause() const {
  if (hit()) return "";
  const std::string name(miss_reason_name(reason));
  // The names of the differences ("dynamic", "config option x"), without
  // the nearest entry's path, which differs from rank to rank.
  std::string names;
  for (const auto& d : differences) {
    if (d.rfind("nearest entry ", 0) == 0 || d.rfind("entry ", 0) == 0) continue;
    const std::string n = d.substr(0, d.find(':'));
    if (names.find(n) == std::string::npos) names += (names.empty() ? "" : ", ") + n;
  }
  if (reason == MissReason::absent) {
    if (differences.empty()) return "absent: first run";
    if (differences.front().rfind("another layout", 0) == 0) return "absent: " + differences.front();
    return "absent: other settings (" + names + ")";
  }
  if (reason == MissReason::stale || reason == MissReason::computation)
    return names.empty() ? name : name + ": " + names;
  return name;
}

MethodCache::Lookup MethodCache::lookup(const FlatArgs& args, const TraceResult* trace, const GraphId* id,
                                        const compiler::CompileStep& compile) const {
  Lookup r;
  auto miss = [&](MissReason reason, std::vector<std::string> diffs) {
    record_miss(id_.dir, {0, path_, std::string(miss_reason_name(reason)), diffs, this_job()});
    r.reason = reason;
    r.differences = std::move(diffs);
    return r;
  };
  process::Env& env = process::Context::current().env();
  double t = env.monotonic_s();
  const auto lap = [&](double& phase) {
    const double now = env.monotonic_s();
    phase += now - t;
    t = now;
  };
  try {
    const std::optional<Store> opened = store(Create::no);
    if (!opened) return miss(MissReason::absent, {});
    const Store& store = *opened;
    r.entry = store.entry(path_);
    lap(r.read_s);
    if (!r.entry) {
      Nearest n = nearest(store);
      if (n.stale) log::warn("cache entry {} is stale ({}); replacing it", n.path, join(n.diffs));
      return miss(n.stale ? MissReason::stale : MissReason::absent, std::move(n.diffs));
    }
    auto diffs = stale_components(r.entry->meta.components, key_.components, trace == nullptr);
    if (!diffs.empty()) {
      log::warn("cache entry {} is stale ({}); replacing it", where(), join(diffs));
      return miss(MissReason::stale, diffs);
    }
    const bool same_computation = trace == nullptr || r.entry->graph_key == id->key;
    // Which parameters the graph reads is part of what it computes: the
    // graph key sees only their shapes (so pipeline stages share objects),
    // the entry records their names. An entry made for other parameters of
    // the same shapes (a flag picking another layer) is a miss; the stored
    // object of the same computation is then bound to this trace's names.
    if (same_computation && trace != nullptr) {
      const std::vector<std::string> now = parameter_names(trace->graph);
      if (now != r.entry->parameters) {
        std::string stored_names, now_names;
        for (const auto& n : r.entry->parameters) stored_names += (stored_names.empty() ? "" : ", ") + n;
        for (const auto& n : now) now_names += (now_names.empty() ? "" : ", ") + n;
        diffs = {"the graph reads other parameters: stored [" + stored_names + "], now [" + now_names + "]"};
        log::warn("cache entry {} was compiled for other parameters ({}); using the stored object with this call's",
                  where(), diffs.front());
        return miss(MissReason::computation, diffs);
      }
    }
    ObjectRecord object;
    Decoded decoded;
    try {
      t = env.monotonic_s();
      object = store.object(r.entry->graph_key, false);
      lap(r.read_s);
      decoded = decode(object, r.entry->parameters);
      lap(r.decode_s);
      check_own_key(*decoded.graph, r.entry->graph_key, id_.key);  // the mix-up rule (own_key.h)
      lap(r.own_key_s);
    } catch (const CacheRefused&) {
      throw;
    } catch (const CacheError& e) {
      log::warn("cache entry {} is unusable ({}); replacing it", where(), e.what());
      if (!process::dry_run()) local_objects(store).discard_damaged(r.entry->graph_key, e.what());
      return miss(MissReason::corrupt, {e.what()});
    }
    if (!same_computation) {
      diffs = trace_differences(decoded.graph->trace, *trace);
      if (diffs.empty()) diffs.push_back("compile settings (config, runtime, decompositions) differ");
      // Two changes are expected, not the code changing under the cache:
      // automatic dynamic making a dim symbolic (the entry was traced with
      // fewer symbolic dims), and a call switching back to a variant whose
      // object is stored (the entry points at the other one).
      if (!id_.key.dynamic && symbolic_dims(*trace) > symbolic_dims(decoded.graph->trace))
        log::info(
            "cache entry {} was traced before automatic dynamic made a dim symbolic ({}); its dynamic version "
            "is looked up and kept",
            where(), join(diffs));
      else if (local_objects(store).holds(id->key))
        log::info(
            "cache entry {} is of another variant of this method ({}); this call's variant is stored: switching "
            "back to it",
            where(), join(diffs));
      else
        log::warn("cache entry {} was compiled from another computation ({}); replacing it", where(), join(diffs));
      return miss(MissReason::computation, diffs);
    }
    std::shared_ptr<compiler::CompiledGraph> g;
    try {
      t = env.monotonic_s();
      g = cache::prepare(std::move(decoded), site(args, compile));
      lap(r.bind_s);
    } catch (const TraceError& e) {
      log::warn("cache entry {} was traced for other inputs ({}); compiling afresh", where(), e.what());
      return miss(MissReason::signature, {e.what()});
    } catch (const CacheRefused&) {
      throw;
    } catch (const CacheError& e) {
      log::warn("cache entry {} does not fit this module ({}); replacing it", where(), e.what());
      return miss(MissReason::corrupt, {e.what()});
    }
    entry_line(id_.summarised, "Cache {} loaded from {}", model_cache_meta(r.entry->meta), module_path());
    if (!process::dry_run() &&
        store.index_damaged(key_.model_info)) {  // heal what a reader found damaged (best effort)
      try {
        store.heal_index(key_.model_info);
      } catch (const CacheError& e) {
        log::debug("index not healed: {}", e.what());
      }
    }
    record_hit(id_.dir, path_, r.entry->compile_time_s);
    note_live_use(store, {path_});  // in use while this process lives (gc beside it)
    r.object_checksum = object.meta.checksum;
    cache::remember(id_.dir, *r.entry, std::move(object));
    r.graph = std::move(g);
    return r;
  } catch (const CacheRefused& e) {
    warn_uncached(id_.dir, "refused", std::string(e.what()) + "; running uncached");
    r.reason = MissReason::refused;
    r.differences = {e.what()};
    return r;
  } catch (const CacheError& e) {
    log::warn("cache entry {} is unusable ({}); replacing it", where(), e.what());
    return miss(MissReason::corrupt, {e.what()});
  }
}

GraphId MethodCache::graph_id(const TraceResult& traced) const { return cache::graph_id(traced, id_.key); }

std::string MethodCache::store_identity(std::string* why_unusable) const {
  try {
    if (process::dry_run()) {  // what store(Create::yes) would make of the directory, writing nothing
      if (const std::optional<Store> s = store(Create::no)) return s->predicted_identity();
      Dir::check_creatable(id_.dir);
      return "created:" + id_.who.host + ":" + std::filesystem::absolute(id_.dir).lexically_normal().string();
    }
    return store(Create::yes)->identity();
  } catch (const CacheError& e) {
    warn_uncached(id_.dir, "refused", std::string(e.what()) + "; running uncached");
    if (why_unusable) *why_unusable = e.what();
    return "unusable:" + id_.who.host + ":" + std::to_string(id_.who.pid) + ":" + std::to_string(id_.who.global_rank);
  }
}

void refuse_in_dry_run(const std::string& what) {
  if (process::dry_run())
    throw ConfigError(what + " in a dry run (dist::CoordinatorOptions::dry_run), which writes nothing to any cache");
}

std::string entry_place(const std::string& path, const std::string& model_info) {
  // "/world8global_rank3/prompt" or "/prompt" after the model_info; a path
  // not of that form (a damaged or foreign index) has no place to name.
  if (path.size() <= model_info.size() || path.compare(0, model_info.size(), model_info) != 0 ||
      path[model_info.size()] != '/')
    return "one process";
  std::string p = path.substr(model_info.size());
  const std::size_t last = p.rfind('/');
  p = last == 0 ? std::string() : p.substr(1, last - 1);
  return p.empty() ? std::string("one process") : p;
}

MethodCache::Neighbour MethodCache::nearest_of_method(const std::string& graph_key) const {
  constexpr std::size_t kMaxIndexes = 256;  // a bound on what is read
  Neighbour best;
  const std::optional<Store> store = read_store();
  if (!store) return best;
  const auto place = entry_place;
  const std::string here = place(path_, key_.model_info);
  const std::string rank = "global_rank" + std::to_string(id_.who.global_rank);
  std::size_t seen = 0, best_distance = SIZE_MAX;
  bool best_mine = false;
  try {
    for (const auto& m : store->model_infos()) {
      if (++seen > kMaxIndexes) break;
      std::optional<DecodedIndex> idx;
      try {
        idx = store->index(m);
      } catch (const CacheError&) {
        continue;
      }
      if (!idx) continue;
      for (const auto& e : idx->index.entries) {
        if (e.path == path_ || e.path.substr(e.path.rfind('/') + 1) != method()) continue;
        Components now;  // the components an entry records (not ge_cache: each entry records its level)
        for (const auto& [k, v] : key_.components)
          if (e.meta.components.count(k)) now.emplace(k, v);
        std::vector<std::string> diffs = differing_components(e.meta.components, now);
        const std::string there = place(e.path, m);
        if (there != here) diffs.push_back("place: stored '" + there + "', now '" + here + "'");
        if (e.graph_key != graph_key)
          diffs.push_back("graph_key: stored '" + e.graph_key + "', now '" + graph_key + "'");
        // The fewest differences; of as few, this rank's own place in another layout.
        const bool mine =
            there.size() >= rank.size() && there.compare(there.size() - rank.size(), rank.size(), rank) == 0;
        if (diffs.size() < best_distance || (diffs.size() == best_distance && mine && !best_mine)) {
          best_mine = mine;
          best_distance = diffs.size();
          best.path = e.path;
          best.differences = std::move(diffs);
        }
      }
    }
  } catch (const CacheError& e) {
    log::debug("cache {} not searched for a neighbour of {}: {}", id_.dir, where(), e.what());
  }
  return best;
}

// The store of one MethodCache (and its copies): the directory opened
// once for a call path's reads, with what it was when opened, so a removed
// or replaced directory is opened again; forgotten when the path ends.
struct MethodCache::OpenStore {
  std::mutex mu;
  std::optional<Store> store;
  dev_t dev = 0;
  ino_t ino = 0;
};

std::optional<Store> MethodCache::store(Create create) const {
  process::Env& env = process::Context::current().env();
  std::lock_guard lock(open_->mu);
  if (create == Create::no) {
    struct stat now {};
    if (env.fstatat(AT_FDCWD, id_.dir.c_str(), &now, 0) != 0) return std::nullopt;
    if (open_->store && now.st_dev == open_->dev && now.st_ino == open_->ino) return open_->store;
  }
  // A write opens the directory again, with every check of a fresh
  // process: one changed (chmod-ed, given away, replaced by a link) since
  // the reads of this call path began is refused before anything is written.
  Store s = Store::open(id_.dir, create);
  struct stat st {};
  if (env.fstat(s.directory().fd(), &st) != 0) throw CacheError("cannot inspect " + id_.dir);
  open_->store = s;
  open_->dev = st.st_dev;
  open_->ino = st.st_ino;
  return s;
}

format::RegionValidity MethodCache::region_validity() const {
  format::RegionValidity v;
  v.config = id_.key.config.hash().hex();
  v.runtime_version = id_.key.runtime_version;
  v.decompositions = id_.key.decompositions;
  v.dynamic = !id_.key.dynamic ? "auto" : *id_.key.dynamic ? "dynamic" : "static";
  v.format_version = names::kFormatVersion;
  return v;
}

bool MethodCache::remote_signed() const { return remote_ && remote_->authenticated(); }

int MethodCache::copy_regions(const compiler::CompiledGraph& g) const {
  if (g.regions.empty()) return 0;
  try {
    return cache::copy_regions(region_store(), g, region_validity());
  } catch (const std::exception& e) {  // no store: nothing to spare later compiles
    log::debug("compiled regions of {} not copied to {}: {}", method(), id_.dir, e.what());
    return 0;
  }
}

bool MethodCache::regions_held(const compiler::CompiledGraph& g) const {
  return g.regions.empty() || cache::regions_held(region_store(), g, region_validity());
}

std::vector<std::string> MethodCache::regions_missing(const TraceResult& trace) const {
  std::vector<std::string> out;
  if (trace.regions.empty()) return out;
  try {
    // Never creates the store (a dry run writes nothing): without one,
    // every region is missing.
    const std::optional<Store> s = store(Create::no);
    format::RegionValidity v = region_validity();
    for (const auto& [region, body] : trace.regions) {
      v.region = region;
      const std::string key = format::region_key(v);
      if (!s || !storage::has_region(*s, key)) out.push_back(key);
    }
  } catch (const std::exception& e) {
    log::debug("compiled regions of {} not looked for in {}: {}", method(), id_.dir, e.what());
    out.clear();
  }
  return out;
}

std::string MethodCache::region_file(const std::string& key) const {
  try {
    return storage::region_file_bytes(region_store(), key).value_or("");
  } catch (const std::exception& e) {
    log::debug("compiled region {} not read from {}: {}", key, id_.dir, e.what());
    return "";
  }
}

bool MethodCache::store_region_file(const std::string& key, const std::string& bytes) const {
  try {
    const Store s = region_store();
    const auto held = s.writing(RegionLibrary::kStoreWaitSeconds);
    return storage::put_region(s, key, bytes, held);
  } catch (const std::exception& e) {  // a compile of the second wave compiles it
    log::warn("the compiled region {} received for {} is not stored in {}: {}; it is compiled here", key, method(),
              id_.dir, e.what());
    return false;
  }
}

ObjectSource::Check MethodCache::integrity() const {
  return [in = id_.key](const ObjectRecord& o) { check_own_key(*decode(o).graph, o.graph_key, in); };
}

LocalObjects MethodCache::local_objects(const Store& store) const { return LocalObjects(store, integrity()); }

std::optional<Store> MethodCache::read_store() const {
  try {
    return store(Create::no);
  } catch (const CacheRefused& e) {
    warn_uncached(id_.dir, "refused", std::string(e.what()) + "; running uncached");
  } catch (const CacheError& e) {
    log::debug("cache {} not read: {}", id_.dir, e.what());
  }
  return std::nullopt;
}

void MethodCache::end_call_path() const {
  std::lock_guard lock(open_->mu);
  open_->store.reset();
}

std::shared_ptr<const ObjectSource> MethodCache::objects(Tier tier) const {
  if (tier == Tier::remote) return remote_ ? std::make_shared<RemoteObjects>(remote_, id_.dir) : nullptr;
  if (auto s = read_store()) return std::make_shared<LocalObjects>(local_objects(*s));
  return nullptr;
}

bool MethodCache::holds(Tier tier, const std::string& key) const {
  const auto source = objects(tier);
  return source && source->holds(key);
}

std::optional<ObjectRecord> MethodCache::record(Tier tier, const std::string& key) const {
  const auto source = objects(tier);
  if (!source) return std::nullopt;
  try {
    return source->read(key, integrity());
  } catch (const CacheRefused& e) {
    warn_uncached(id_.dir, "refused", std::string(e.what()) + "; running uncached");
    return std::nullopt;
  }
}

std::optional<MethodCache::Stored> MethodCache::stored(Tier tier, const GraphId& id, const TraceResult& trace,
                                                       const FlatArgs& args,
                                                       const compiler::CompileStep& compile) const {
  const auto source = objects(tier);
  if (!source) return std::nullopt;
  std::shared_ptr<compiler::CompiledGraph> g;
  try {
    // Checked as any stored object is, then made runnable for this call
    // before it counts: decoded once, with this trace's parameter names.
    auto o = source->read(id.key, [&](const ObjectRecord& r) {
      Decoded d = decode(r, parameter_names(trace.graph));
      check_own_key(*d.graph, id.key, id_.key);  // the mix-up rule (own_key.h)
      d.graph->trace.name = trace.name;          // the object may have been stored for another method
      g = cache::prepare(std::move(d), site(args, compile));
    });
    if (!o) return std::nullopt;
    entry_line(id_.summarised, "Cache object {} of {} {} {}: reusing the stored object, no compile", id.key, trace.name,
               tier == Tier::local ? "found in" : "read from", source->where());
    return Stored{std::move(g), std::move(*o)};
  } catch (const CacheRefused& e) {  // an unsafe directory: said once, as the lookup says it
    warn_uncached(id_.dir, "refused", std::string(e.what()) + "; running uncached");
    return std::nullopt;
  }
}

std::optional<MethodCache::Stored> MethodCache::remote_entry(const FlatArgs& args,
                                                             const compiler::CompileStep& compile) const {
  if (!remote_) return std::nullopt;
  if (!remote_->authenticated()) {  // an unsigned entry is a claim: the trace decides (own_key.h)
    if (process::Context::current().get<process::Once>().first("unsigned remote fast path|" + remote_->config().url))
      log::info(
          "remote cache {} is not signed: the code_version hit check does not take its entries; a method missing "
          "locally is traced and its remote object checked against the trace",
          remote_->config().url);
    return std::nullopt;
  }
  const auto re = remote_->entry(path_, id_.dir);
  if (!re) return std::nullopt;
  if (const auto diffs = stale_components(re->entry.meta.components, key_.components, true); !diffs.empty()) {
    log::info("remote cache entry {} is of another version ({}); not used", path_, join(diffs));
    return std::nullopt;
  }
  std::shared_ptr<compiler::CompiledGraph> g;
  const RemoteTier::Check bind = [&](const ObjectRecord& o) {
    Decoded d = decode(o, re->entry.parameters);
    check_own_key(*d.graph, re->entry.graph_key, id_.key);
    g = prepare(std::move(d), args, compile);
  };
  auto got = RemoteObjects(remote_, id_.dir).read_named(re->object_hash, re->entry.graph_key, bind);
  if (!got) return std::nullopt;
  entry_line(id_.summarised, "Cache {} read from the remote cache {}", model_cache_meta(re->entry.meta),
             remote_->config().url);
  return Stored{std::move(g), std::move(*got)};
}

void MethodCache::commit_later(const compiler::CompiledGraph& g, const ObjectRecord& object) const {
  EntryRecord e = make_entry(g, object);
  // A signed remote's object is trusted as a compile of this store is: its
  // regions are copied into regions/ (an unsigned one's program is a claim).
  std::shared_ptr<compiler::CompiledGraph> regions;
  if (!g.regions.empty() && remote_signed()) regions = std::make_shared<compiler::CompiledGraph>(regions_of(g));
  cache::commit_later([self = *this, object, e, regions] {
    try {
      self.save({{object}, {e}, {}});
      if (regions) self.copy_regions(*regions);
    } catch (const CacheRefused& x) {
      warn_uncached(self.dir(), "refused", std::string(x.what()) + "; running uncached");
    } catch (const CacheError& x) {
      warn_uncached(self.dir(), "save",
                    "could not save " + self.where() + " to the cache (" + x.what() +
                        "); running uncached, the cache as it was is kept");
    }
  });
}

void MethodCache::push_remote(const std::vector<ObjectRecord>& objects, const std::vector<EntryRecord>& entries) const {
  if (!remote_ || !remote_->can_write()) return;
  const RemoteTier::Pushed p = remote_->push(objects, entries, id_.dir);
  if (p.objects + p.entries > 0)
    log::debug("remote cache {}: wrote {} object(s), {} entr(ies); {} already there", remote_->config().url, p.objects,
               p.entries, p.present);
  if (!objects.empty() && !p.failed) remote_->push_tuning(compiler::TuningTable::process().records(), id_.dir);
}

ObjectRecord MethodCache::make_object(const compiler::CompiledGraph& g, const GraphId& id) const {
  return cache::make_object(g, id, objects_with_program(), id_.who, nullptr);
}

ObjectRecord MethodCache::make_object(const compiler::CompiledGraph& g, const GraphId& id, const std::string& raw,
                                      bool raw_with_program) const {
  return cache::make_object(g, id, raw_with_program, id_.who, &raw);
}

EntryRecord MethodCache::make_entry(const compiler::CompiledGraph& g, const ObjectRecord& object) const {
  return cache::make_entry(g, path_, key_, id_.who, object);
}

Store::Committed MethodCache::save(Store::Commit c) const {
  refuse_in_dry_run("saving the entry " + where());
  const Store store = *this->store(Create::yes);
  // The stored object this process's own entry reuses, as it read it (for
  // save_cache_artifacts, when the commit writes no object of its key).
  std::optional<ObjectRecord> reused;
  for (const auto& e : c.entries)
    if (e.path == path_)
      for (const auto& o : c.pinned)
        if (o.graph_key == e.graph_key) reused = o;
  Store::Committed done = store.commit(std::move(c), integrity());
  for (const auto& key : done.adopted)
    entry_line(id_.summarised, "Cache object {} was stored by another writer first; adopting its bytes", key);
  side_.save_tuning(store);
  store.directory().remove_stale_temps();  // a crashed writer's leftovers (objects/: by gc and verify --repair)
  std::vector<std::string> paths;
  for (const auto& e : done.entries) {
    entry_line(id_.summarised, "Cache {} saved to {}", model_cache_meta(e.meta),
               (std::filesystem::path(id_.dir) / e.path / names::kModuleDataset).string());
    paths.push_back(e.path);
    if (e.path == path_) {  // this process's own entry (save_cache_artifacts)
      if (auto it = done.kept.find(e.graph_key); it != done.kept.end())
        cache::remember(id_.dir, e, it->second);
      else if (reused && reused->graph_key == e.graph_key)
        cache::remember(id_.dir, e, std::move(*reused));
    }
  }
  record_save(id_.dir, paths);
  note_live_use(store, paths);  // its save date is this host's clock, which a gc's may be ahead of
  enforce_limit(store, paths);
  return done;
}

std::shared_ptr<compiler::CompiledGraph> MethodCache::runnable(const ObjectRecord& o,
                                                               const std::vector<std::string>& parameters,
                                                               const FlatArgs& args,
                                                               const compiler::CompileStep& compile) const {
  return cache::runnable(o, parameters, site(args, compile));
}

std::shared_ptr<compiler::CompiledGraph> MethodCache::prepare(Decoded d, const FlatArgs& args,
                                                              const compiler::CompileStep& compile) const {
  return cache::prepare(std::move(d), site(args, compile));
}

CallSite MethodCache::site(const FlatArgs& args, const compiler::CompileStep& compile) const {
  return {args, compile, *id_.key.module, id_.key.runtime_version};
}

void MethodCache::load_tuning() const {
  const std::optional<Store> s = read_store();
  side_.load_tuning(s ? &*s : nullptr);
}

Store MethodCache::region_store() const {
  if (auto s = store(Create::no)) return *s;
  return *store(Create::yes);
}

void MethodCache::save_tuning() const {
  try {
    const Store s = *store(Create::yes);
    side_.save_tuning(s);
  } catch (const Error& e) {  // kept in this process; the next save tries again
    log::debug("tuning decisions not saved to {}: {}", id_.dir, e.what());
  }
}

std::vector<DimMark> MethodCache::load_profile() const {
  const std::optional<Store> s = read_store();
  return side_.load_profile(s ? &*s : nullptr, key_.model_info, id_.key.method);
}

void MethodCache::save_profile(const std::vector<DimMark>& dims) const {
  if (dims.empty()) return;
  refuse_in_dry_run("saving the dynamic-shape profile of " + where());
  try {
    side_.save_profile(*store(Create::yes), key_.model_info, id_.key.method, dims);
  } catch (const Error& e) {
    warn_uncached(id_.dir, "profiles",
                  "could not save the dynamic-shape profile of " + where() + " in " + id_.dir + " (" + e.what() +
                      "); the decision stays in this process");
  }
}

void MethodCache::remember(const EntryRecord& entry, const ObjectRecord& object) const {
  cache::remember(id_.dir, entry, object);
}

void MethodCache::remove_entry() const {
  const std::optional<Store> s = store(Create::no);
  if (!s) return;
  s->update_index(key_.model_info, model_components(key_.components), {}, {path_});
  forget_entries(id_.dir, {path_});
}

MethodCache::Nearest MethodCache::nearest(const Store& store) const {
  // The same method of the same model class under another model_info: an
  // entry of another format or runtime version (stale), one made with
  // other settings (what changed), or one of another layout (world size,
  // tp, pp: the operator's most common change).
  constexpr std::size_t kMaxIndexes = 256;  // a bound on what an absent miss reads
  using namespace component;
  const std::string where_in = path_.substr(key_.model_info.size());
  const std::string func = where_in.substr(where_in.rfind('/') + 1);
  const auto& cls = key_.components.at(kModelClass);
  const Layout here{id_.who.world_size, id_.tp, id_.pp};
  StoredLayouts layouts;
  std::vector<EntryRecord> candidates;  // of this method
  std::size_t seen = 0;
  for (const auto& m : store.model_infos()) {
    if (++seen > kMaxIndexes) continue;  // this model_info too: its other world sizes are other layouts
    std::optional<DecodedIndex> idx;
    try {
      idx = store.index(m);
    } catch (const IoError& e) {  // the disk failing is said; a damaged index is verify's to report
      log::warn("the index of {} was not read for the nearest entry of {} ({})", m, where(), e.what());
      continue;
    } catch (const CacheError&) {
      continue;
    }
    if (!idx) continue;
    for (auto& e : idx->index.entries) {
      const auto c = e.meta.components.find(kModelClass);
      if (c == e.meta.components.end() || c->second != cls || e.path.size() <= m.size()) continue;
      if (e.meta.date < process_began()) layouts.add(e);
      const std::string tail = e.path.substr(m.size());
      if (tail.substr(tail.rfind('/') + 1) == func) candidates.push_back(std::move(e));
    }
  }
  // When this layout stored the method for another rank, the layout is
  // not why this rank missed: only this rank's own history is compared.
  bool layout_stored = false;
  for (const EntryRecord& e : candidates) layout_stored = layout_stored || (layouts.of(e) == here && e.path != path_);
  Nearest best;
  std::tuple<bool, bool, bool, std::size_t> best_rank{};
  for (const EntryRecord& e : candidates) {
    const bool same_place = e.path.substr(e.meta.model_info.size()) == where_in;
    const Layout there = layouts.of(e);
    const bool other_layout = there != here;
    if (e.path == path_ || (!same_place && !other_layout) || (other_layout && layout_stored)) continue;
    Nearest n;
    n.path = e.path;
    n.other_layout = other_layout;
    Components versions;
    for (const char* k : {kFormatVersion, kRuntimeVersion}) versions[k] = key_.components.at(k);
    n.diffs = differing_components(e.meta.components, versions);
    n.stale = !n.diffs.empty();
    if (n.stale && !same_place) continue;  // an old version is this place's own entry, never another's
    auto settings = model_differences(e.meta.components, key_.components);
    const std::size_t distance = settings.size();
    if (!n.stale) {
      n.diffs.clear();
      if (other_layout) {
        n.diffs = layout_differences(there, e.meta.rank, here, id_.who);
        n.diffs.insert(n.diffs.begin(),
                       "another layout (stored " + layout_text(there) + ", now " + layout_text(here) + ")");
      }
      for (auto& d : settings) n.diffs.push_back(std::move(d));
    }
    if (n.diffs.empty()) continue;
    // Prefer an entry of this format and runtime, then one of this layout,
    // then of this rank, then the fewest changed settings (the old version
    // of this very entry when stale).
    const auto rank = std::make_tuple(n.stale, other_layout, e.meta.rank.global_rank != id_.who.global_rank, distance);
    if (best.path.empty() || rank < best_rank) {
      best = std::move(n);
      best_rank = rank;
    }
  }
  if (best.path.empty()) return best;
  const auto at = best.other_layout && !best.stale ? best.diffs.begin() + 1 : best.diffs.begin();
  best.diffs.insert(at, best.stale          ? "entry " + best.path + " is of another version"
                        : best.other_layout ? "nearest entry " + best.path
                                            : "nearest entry " + best.path + " was made with other settings");
  return best;
}

}  // namespace npucache::cache
