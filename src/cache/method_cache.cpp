#include "cache/method_cache.h"

#include "cache/artifact.h"
#include "cache/cache_error.h"
#include "cache/explain.h"
#include "cache/layout.h"
#include "cache/registry.h"
#include "cache/stats.h"
#include "cache/store.h"
#include "log/log.h"

namespace npucache::cache {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

MethodCache::MethodCache(MethodIdentity id)
    : id_(std::move(id)),
      key_(lookup_key(id_.key)),
      path_(layout::entry_path(key_.model_info, id_.key.method, id_.who.world_size, id_.who.global_rank)) {}

std::string MethodCache::where() const { return (std::filesystem::path(id_.dir) / path_).string(); }

std::string MethodCache::module_path() const {
  return (std::filesystem::path(id_.dir) / path_ / layout::kModuleDataset).string();
}

std::string MethodCache::Lookup::reason_text() const {
  std::string s(miss_reason_name(reason));
  if (!differences.empty()) s += " (" + join(differences) + ")";
  return s;
}

MethodCache::Lookup MethodCache::lookup(const FlatArgs& args, const TraceResult* trace, const GraphId* id,
                                        const compiler::CompileStep& compile) const {
  Lookup r;
  auto miss = [&](MissReason reason, std::vector<std::string> diffs) {
    record_miss(id_.dir, {0, path_, std::string(miss_reason_name(reason)), diffs});
    r.reason = reason;
    r.differences = std::move(diffs);
    return r;
  };
  try {
    Hdf5Store store(id_.dir);
    auto reader = store.shared_reader();
    r.entry = reader ? reader->entry(path_) : std::nullopt;
    if (!r.entry) return miss(MissReason::absent, {});
    auto diffs = stale_components(r.entry->meta.components, key_.components, trace == nullptr);
    if (!diffs.empty()) {
      log::warn("cache entry {} is stale ({}); recompiling and replacing it", where(), join(diffs));
      return miss(MissReason::stale, diffs);
    }
    const bool same_computation = trace == nullptr || r.entry->graph_key == id->key;
    ObjectRecord object = reader->object(r.entry->graph_key, false);
    bool has_program = false;
    auto g = load_object(object, r.entry->parameters, &has_program);
    if (!same_computation) {
      diffs = trace_differences(g->trace, *trace);
      if (diffs.empty()) diffs.push_back("compile settings (config, runtime, decompositions) differ");
      log::warn("cache entry {} was compiled from another computation ({}); recompiling and replacing it", where(),
                join(diffs));
      return miss(MissReason::computation, diffs);
    }
    SymBindings b;
    try {
      b = g->trace.signature.bind(args);
    } catch (const TraceError& e) {
      log::warn("cache entry {} was traced for other inputs ({}); compiling afresh", where(), e.what());
      return miss(MissReason::signature, {e.what()});
    }
    if (!has_program) {  // the stored graph after the passes, lowered with the stored autotune decisions
      const compiler::CompileHints hints{&g->optimized, &g->autotune};
      g = compile(std::move(g->trace), b, &hints);
    }
    log::info("Cache {} loaded from {}", model_cache_meta(r.entry->meta), module_path());
    record_hit(id_.dir, path_);
    cache::remember(*r.entry, object);
    r.graph = std::move(g);
    return r;
  } catch (const CacheRefused& e) {
    log::error("{}; running uncached", e.what());
    r.reason = MissReason::refused;
    r.differences = {e.what()};
    return r;
  } catch (const CacheError& e) {
    log::warn("cache entry {} is unusable ({}); recompiling and replacing it", where(), e.what());
    return miss(MissReason::corrupt, {e.what()});
  }
}

GraphId MethodCache::graph_id(const TraceResult& traced) const { return cache::graph_id(traced, id_.key); }

bool MethodCache::holds(const std::string& key) const {
  try {
    auto reader = Hdf5Store(id_.dir).reader();
    return reader && reader->has_object(key);
  } catch (const CacheError&) {
    return false;
  }
}

std::string MethodCache::object_bytes(const std::string& key) const {
  auto reader = Hdf5Store(id_.dir).reader();
  if (!reader) throw CacheError("no cache in " + id_.dir);
  return reader->object(key, false).raw;
}

ObjectRecord MethodCache::make_object(const compiler::CompiledGraph& g, const GraphId& id, const std::string* raw) const {
  return cache::make_object(g, id, stores_program(), id_.who, raw);
}

EntryRecord MethodCache::make_entry(const compiler::CompiledGraph& g, const ObjectRecord& object) const {
  return cache::make_entry(g, path_, key_, id_.who, object);
}

void MethodCache::save(const std::vector<ObjectRecord>& objects, const std::vector<EntryRecord>& entries) const {
  Hdf5Store::Transaction t;
  t.objects = objects;
  t.entries = entries;
  Hdf5Store(id_.dir).commit(t);
  std::vector<std::string> paths;
  for (const auto& e : entries) {
    log::info("Cache {} saved to {}", model_cache_meta(e.meta),
              (std::filesystem::path(id_.dir) / e.path / layout::kModuleDataset).string());
    paths.push_back(e.path);
    if (e.path == path_)  // this process's own entry (save_cache_artifacts)
      for (const auto& o : objects)
        if (o.graph_key == e.graph_key) cache::remember(e, o);
  }
  record_save(id_.dir, paths);
}

void MethodCache::remember(const EntryRecord& entry, const ObjectRecord& object) const {
  cache::remember(entry, object);
}

void MethodCache::remove_entry() const {
  Hdf5Store::Transaction t;
  t.remove_entries.push_back(path_);
  Hdf5Store(id_.dir).commit(t);
  forget_entries(id_.dir, {path_});
}

}  // namespace npucache::cache
