#include "cache/context.h"

#include <npucache/communicator.h>
#include <npucache/device.h>
#include <npucache/mpi.h>
#include <npucache/ops.h>

#include "cache/cache_error.h"
#include "cache/registry.h"
#include "cache/stats.h"
#include "compiler/compiled_graph.h"
#include "log/log.h"

namespace npucache::cache {

std::string CacheContext::where() const { return (std::filesystem::path(dir) / path).string(); }

CacheContext make_context(const nn::Module& module, const CacheOptions& o, const CompilerConfig& config,
                          bool store_program) {
  CacheContext c;
  c.dir = o.cache_dir.empty() ? default_cache_dir() : std::filesystem::absolute(o.cache_dir).string();
  const bool mpi = MpiSession::initialized();
  Communicator& comm = current_communicator();
  c.who.world_size = o.world_size.value_or(mpi ? MpiSession::world_size() : comm.layout().world_size);
  c.who.global_rank = o.global_rank.value_or(mpi ? MpiSession::world_rank() : comm.global_rank());
  c.who.tp_rank = o.tp_rank.value_or(comm.rank(GroupRole::tp));
  c.who.pp_rank = o.pp_rank.value_or(comm.rank(GroupRole::pp));
  c.method = o.method_name;
  c.dynamic = o.dynamic;
  c.decompositions = std::make_shared<DecompositionTable>(o.custom_decompositions);
  c.key_inputs.module = &module;
  c.key_inputs.method = o.method_name;
  c.key_inputs.config = config;
  c.key_inputs.dynamic = o.dynamic;
  c.key_inputs.ge_cache = config.mode == CompileMode::max_autotune && (o.ge_cache || store_program);
  c.key_inputs.decompositions = c.decompositions.get();
  c.key_inputs.code_version = o.code_version;
  c.key_inputs.device = current_device();
  c.key = lookup_key(c.key_inputs);
  c.path = entry_path(c.key.model_info, o.method_name, c.who.world_size, c.who.global_rank);
  return c;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}
}  // namespace

LocalLookup lookup_local(const CacheContext& c, const FlatArgs& args) {
  LocalLookup r;
  auto miss = [&](std::string reason, std::vector<std::string> diffs) {
    record_miss(c.dir, {0, c.path, reason, diffs});
    r.miss_reason = std::move(reason);
    r.differences = std::move(diffs);
    return r;
  };
  try {
    Hdf5Store store(c.dir);
    auto reader = store.shared_reader();
    r.entry = reader ? reader->entry(c.path) : std::nullopt;
    if (!r.entry) return miss("absent", {});
    auto diffs = differing_components(r.entry->attrs, c.key.components);
    if (!diffs.empty()) {
      log::warn("cache entry {} is stale ({}); recompiling and replacing it", c.where(), join(diffs));
      return miss("stale", diffs);
    }
    r.object = reader->object(r.entry->graph_key, false);
    bool has_program = false;
    auto g = load_object(*r.object, r.entry->parameters, &has_program);
    SymBindings b;
    try {
      b = g->trace.signature.bind(args);
    } catch (const TraceError& e) {
      log::warn("cache entry {} was traced for other inputs ({}); compiling afresh", c.where(), e.what());
      return miss("signature", {e.what()});
    }
    if (!has_program)  // the seed's first level: recompile the program from the stored graph
      *g = compiler::compile_graph(std::move(g->trace), c.key_inputs.config, *c.decompositions, b, c.dynamic,
                                   c.key_inputs.device);
    log::info("Cache {} loaded from {}", model_cache_meta(*r.entry), c.where());
    record_hit(c.dir, c.path);
    remember(*r.entry, *r.object);
    r.graph = std::move(g);
    return r;
  } catch (const CacheError& e) {
    if (std::string(e.what()).find("refusing to use") != std::string::npos) {
      log::error("{}; running uncached", e.what());
      r.miss_reason = "refused";
      r.differences = {e.what()};
      return r;
    }
    log::warn("cache entry {} is unusable ({}); recompiling and replacing it", c.where(), e.what());
    return miss("corrupt", {e.what()});
  }
}

bool store_holds(const CacheContext& c, const std::string& graph_key) {
  try {
    auto reader = Hdf5Store(c.dir).reader();
    return reader && reader->has_object(graph_key);
  } catch (const CacheError&) {
    return false;
  }
}

}  // namespace npucache::cache
