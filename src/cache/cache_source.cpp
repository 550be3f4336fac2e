// cache_compile's persistence: the EntrySource that loads and saves
// compiled graphs in the HDF5 store (see include/npucache/cache.h).
#include <npucache/cache.h>
#include <npucache/communicator.h>
#include <npucache/device.h>
#include <npucache/mpi.h>
#include <npucache/ops.h>

#include "cache/artifact.h"
#include "cache/cache_error.h"
#include "cache/keys.h"
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
      : module_(module), options_(o) {
    dir_ = o.cache_dir.empty() ? default_cache_dir() : std::filesystem::absolute(o.cache_dir).string();
    const bool mpi = MpiSession::initialized();
    Communicator& comm = current_communicator();
    who_.world_size = o.world_size.value_or(mpi ? MpiSession::world_size() : comm.layout().world_size);
    who_.global_rank = o.global_rank.value_or(mpi ? MpiSession::world_rank() : comm.global_rank());
    who_.tp_rank = o.tp_rank.value_or(comm.rank(GroupRole::tp));
    who_.pp_rank = o.pp_rank.value_or(comm.rank(GroupRole::pp));
    key_inputs_.module = &module_;
    key_inputs_.method = o.method_name;
    key_inputs_.config = config;
    key_inputs_.dynamic = o.dynamic;
    key_inputs_.ge_cache = o.ge_cache && config.mode == CompileMode::max_autotune;
    key_inputs_.decompositions = &options_.custom_decompositions;
    key_inputs_.code_version = o.code_version;
    key_inputs_.device = current_device();
    if (o.ge_cache && config.mode == CompileMode::reduce_overhead)
      log::warn("ge_cache has no effect in reduce-overhead mode (only max-autotune caches the compiled program); "
                "{} caches its graph only",
                o.method_name);
  }

  std::shared_ptr<compiler::CompiledGraph> load(const FlatArgs& args) override {
    try {
      store_.emplace(dir_);
      key_ = cache::lookup_key(key_inputs_);
      path_ = cache::entry_path(key_.model_info, options_.method_name, who_.world_size, who_.global_rank);
      auto reader = store_->reader();
      std::optional<cache::EntryRecord> entry = reader ? reader->entry(path_) : std::nullopt;
      if (!entry) {
        miss("absent", {});
        return nullptr;
      }
      auto diffs = cache::differing_components(entry->attrs, key_.components);
      if (!diffs.empty()) {
        log::warn("cache entry {} is stale ({}); recompiling and replacing it", where(), join(diffs));
        miss("stale", diffs);
        return nullptr;
      }
      cache::ObjectRecord obj = reader->object(entry->graph_key);
      bool has_program = false;
      auto g = cache::load_object(obj, entry->parameters, &has_program);
      SymBindings b;
      try {
        b = g->trace.signature.bind(args);
      } catch (const TraceError& e) {
        log::warn("cache entry {} was traced for other inputs ({}); compiling afresh", where(), e.what());
        miss("signature", {e.what()});
        return nullptr;
      }
      if (!has_program) {  // the seed's first level: recompile the program from the stored graph
        *g = compiler::compile_graph(std::move(g->trace), key_inputs_.config, options_.custom_decompositions, b,
                                     options_.dynamic, key_inputs_.device);
      }
      log::info("Cache {} loaded from {}", cache::model_cache_meta(*entry), where());
      cache::record_hit(dir_, path_);
      cache::remember(*entry, obj);
      return g;
    } catch (const CacheError& e) {
      if (refused(e)) return nullptr;
      log::warn("cache entry {} is unusable ({}); recompiling and replacing it", where(), e.what());
      miss("corrupt", {e.what()});
      return nullptr;
    }
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
      if (!store_) store_.emplace(dir_);
      if (key_.hash.empty()) {
        key_ = cache::lookup_key(key_inputs_);
        path_ = cache::entry_path(key_.model_info, options_.method_name, who_.world_size, who_.global_rank);
      }
      const std::string gk = cache::graph_key(g.trace.graph, key_inputs_);
      cache::ObjectRecord obj = cache::make_object(g, gk, key_inputs_.ge_cache, who_);
      cache::Hdf5Store::Transaction t;
      t.objects.push_back(obj);
      cache::EntryRecord e = cache::make_entry(g, path_, key_, gk, who_, obj);
      t.entries.push_back(e);
      store_->commit(t);
      log::info("Cache {} saved to {}", cache::model_cache_meta(e), where());
      cache::record_save(dir_, {path_});
      cache::remember(e, obj);
    } catch (const CacheError& e) {
      if (refused(e)) return;
      log::warn("could not save {} to the cache ({}); continuing uncached", where(), e.what());
    }
  }

  void recompiled(const std::string& name) override {
    log::warn("Skip cache as {} recompiled", name);
    if (disabled_ || !store_) return;
    try {
      cache::Hdf5Store::Transaction t;
      t.remove_entries.push_back(path_);
      store_->commit(t);
      cache::forget_entries(dir_, {path_});
    } catch (const CacheError& e) {
      log::warn("could not remove {} from the cache: {}", where(), e.what());
    }
  }

 private:
  std::string where() const { return (std::filesystem::path(dir_) / path_).string(); }

  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
  }

  // A refused store (foreign owner, symlink) disables caching for this
  // function: it runs uncached and nothing is written.
  bool refused(const CacheError& e) {
    if (std::string(e.what()).find("refusing to use") == std::string::npos) return false;
    log::error("{}; running uncached", e.what());
    disabled_ = true;
    return true;
  }

  void miss(const std::string& reason, const std::vector<std::string>& diffs) {
    cache::record_miss(dir_, {0, path_, reason, diffs});
  }

  const nn::Module& module_;
  CacheOptions options_;
  std::string dir_;
  cache::Producer who_;
  cache::KeyInputs key_inputs_;
  cache::LookupKey key_;
  std::string path_;
  std::optional<cache::Hdf5Store> store_;
  bool disabled_ = false;
};

}  // namespace

std::shared_ptr<EntrySource> make_cache_source(const nn::Module& module, const CacheOptions& options,
                                               CompileOptions& co) {
  co.config = resolve_config(options.config, options.backend);
  co.dynamic = options.dynamic;
  co.custom_decompositions = options.custom_decompositions;
  co.method_name = options.method_name;
  co.arg_names = options.arg_names;
  return std::make_shared<CacheSource>(module, options, *co.config);
}

}  // namespace detail
}  // namespace npucache
