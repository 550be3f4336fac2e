#include "cache/cache_compile.h"

#include <npucache/device.h>
#include <npucache/error.h>

#include "cache/remote_options.h"
#include "cache/source.h"
#include "compiler/engine.h"
#include "compiler/surface.h"
#include "compiler/tuning_table.h"
#include "log/log.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "process/once.h"

#include <filesystem>

namespace npucache {
namespace cache {

CompilerConfig cached_config(const CacheOptions& o) { return compiler::resolve_surface(o.compile).config; }

std::shared_ptr<MethodCache> method_cache(const nn::Module& module, const CacheOptions& o, const CompilerConfig& config,
                                          bool store_program, bool summarised) {
  MethodIdentity id;
  id.dir = o.cache_dir.empty() ? default_cache_dir() : std::filesystem::absolute(o.cache_dir).string();
  const process::Identity me = process::Context::current().identity();
  Communicator& comm = current_communicator();
  id.who.world_size = o.world_size.value_or(me.mpi ? me.world_size : comm.layout().world_size);
  id.who.global_rank = o.global_rank.value_or(me.mpi ? me.world_rank : comm.global_rank());
  id.who.tp_rank = o.tp_rank.value_or(comm.rank(GroupRole::tp));
  id.who.pp_rank = o.pp_rank.value_or(comm.rank(GroupRole::pp));
  if (!o.world_size || *o.world_size == comm.layout().world_size) {  // the degrees of the communicator's layout
    id.tp = comm.layout().tp;
    id.pp = comm.layout().pp;
  }
  id.who.host = me.host;
  id.who.pid = me.pid;
  id.summarised = summarised && id.who.world_size > 1;  // a job of one process keeps its own lines
  KeyInputs& k = id.key;
  k.module = &module;
  k.method = o.compile.method_name;
  k.config = config;
  k.dynamic = o.compile.dynamic;
  // A captured method stores its program (beside its capture templates), so
  // a warm start neither lowers nor captures; max-autotune stores it with
  // ge_cache (or when coordinated).
  k.ge_cache = config.captures() || o.ge_cache || store_program;
  k.decompositions = decomposition_names(o.compile.custom_decompositions);
  k.code_version = o.code_version;
  k.runtime_version = compiler::tuning_runtime(current_device());
  if (o.hit_check == HitCheck::code_version && o.code_version.empty())
    throw ConfigError(
        "hit_check = HitCheck::code_version serves stored programs without tracing on the user's word "
        "that code_version changes with the code: set code_version, or use the default HitCheck::trace");
  id.fast_path = o.hit_check == HitCheck::code_version;
  id.remote = resolve_remote(o.remote);
  return std::make_shared<MethodCache>(std::move(id));
}

void warn_ineffective_options(const CacheOptions& options, const CompilerConfig& config) {
  if (options.ge_cache && config.captures() &&
      process::Context::current().get<process::Once>().first("ge_cache in reduce-overhead mode"))
    log::warn(
        "ge_cache has no effect in reduce-overhead mode: a captured method ({} and any other) always stores its "
        "compiled program and its capture templates",
        options.compile.method_name);
}

}  // namespace cache

std::shared_ptr<detail::CompiledFunction> detail::make_cached_function(const nn::Module& module,
                                                                       const CacheOptions& options) {
  const CompilerConfig config = cache::cached_config(options);
  cache::warn_ineffective_options(options, config);
  if (options.compile.disable) return make_function(module, options.compile, nullptr);
  if (!process::Context::current().get<process::DryRun>().claim(false))  // never mixed (process/dry_run.h)
    throw ConfigError("cache_compile of " + options.compile.method_name +
                      ": this process is a dry run (dist::CoordinatorOptions::dry_run), which compiles and writes "
                      "nothing; build functions that do in another process");
  auto source = std::make_shared<cache::LocalSource>(cache::method_cache(module, options, config, false),
                                                     cache::MethodSource::ReportSink{});
  return make_function(module, options.compile, std::move(source));
}

}  // namespace npucache
