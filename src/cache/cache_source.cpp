// cache_compile's persistence: the EntrySource that loads and saves
// compiled graphs in the HDF5 store (see include/npucache/cache.h).
#include <npucache/cache.h>

#include "cache/artifact.h"
#include "cache/cache_error.h"
#include "cache/context.h"
#include "cache/registry.h"
#include "cache/stats.h"
#include "cache/store.h"
#include "compiler/compiled_graph.h"
#include "log/log.h"

#include <cstdlib>

namespace npucache {

std::string default_cache_dir() {
  const char* env = std::getenv("NPUCACHE_CACHE_DIR");
  return std::filesystem::absolute(env && *env ? env : ".npucache").string();
}

namespace detail {
namespace {

class CacheSource final : public EntrySource {
 public:
  CacheSource(const nn::Module& module, const CacheOptions& o, const CompilerConfig& config)
      : ctx_(cache::make_context(module, o, config, false)) {
    if (o.ge_cache && config.mode == CompileMode::reduce_overhead)
      log::warn("ge_cache has no effect in reduce-overhead mode (only max-autotune caches the compiled program); "
                "{} caches its graph only",
                o.method_name);
  }

  std::shared_ptr<compiler::CompiledGraph> load(const FlatArgs& args, const std::function<TraceResult()>&) override {
    cache::LocalLookup r = cache::lookup_local(ctx_, args);
    if (r.miss_reason == "refused") disabled_ = true;
    return r.graph;
  }

  void traced(const TraceResult& t) override {
    for (const Node& n : t.graph.nodes())
      if (op_info(n.op).rng)
        throw ConfigError("cache_compile cannot cache " + t.name + ": node '" + n.name + "' (" +
                          std::string(op_name(n.op)) +
                          ") draws random numbers, and a cached graph would replay them; remove the RNG op or "
                          "use compile() instead. Nothing was written");
  }

  void compiled(const compiler::CompiledGraph& g) override {
    if (disabled_) return;
    try {
      const std::string gk = cache::graph_key(g.trace.graph, ctx_.key_inputs);
      cache::ObjectRecord obj = cache::make_object(g, gk, ctx_.key_inputs.ge_cache, ctx_.who);
      cache::EntryRecord e = cache::make_entry(g, ctx_.path, ctx_.key, gk, ctx_.who, obj);
      cache::Hdf5Store::Transaction t;
      t.objects.push_back(obj);
      t.entries.push_back(e);
      cache::Hdf5Store(ctx_.dir).commit(t);
      log::info("Cache {} saved to {}", cache::model_cache_meta(e), ctx_.where());
      cache::record_save(ctx_.dir, {ctx_.path});
      cache::remember(e, obj);
    } catch (const CacheError& e) {
      log::warn("could not save {} to the cache ({}); continuing uncached", ctx_.where(), e.what());
    }
  }

  void recompiled(const std::string& name) override {
    log::warn("Skip cache as {} recompiled", name);
    if (disabled_) return;
    try {
      cache::Hdf5Store::Transaction t;
      t.remove_entries.push_back(ctx_.path);
      cache::Hdf5Store(ctx_.dir).commit(t);
      cache::forget_entries(ctx_.dir, {ctx_.path});
    } catch (const CacheError& e) {
      log::warn("could not remove {} from the cache: {}", ctx_.where(), e.what());
    }
  }

 private:
  cache::CacheContext ctx_;
  bool disabled_ = false;
};

}  // namespace

CompileOptions to_compile_options(const CacheOptions& options) {
  CompileOptions co;
  co.config = resolve_config(options.config, options.backend);
  co.dynamic = options.dynamic;
  co.custom_decompositions = options.custom_decompositions;
  co.method_name = options.method_name;
  co.arg_names = options.arg_names;
  return co;
}

std::shared_ptr<EntrySource> make_cache_source(const nn::Module& module, const CacheOptions& options,
                                               CompileOptions& co) {
  co = to_compile_options(options);
  return std::make_shared<CacheSource>(module, options, *co.config);
}

}  // namespace detail
}  // namespace npucache
