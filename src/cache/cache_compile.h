// cache_compile (include/npucache/cache.h) in the cache layer: the method
// cache of one cached method from the user's options. The distributed
// version (src/coord) builds the same method cache and only adds the
// coordinator as the source of its entries.
#pragma once

#include <npucache/cache.h>

#include "cache/method_cache.h"
#include "cache/uses.h"

#include <memory>

namespace npucache::cache {

// The effective compiler config of a cached method (ConfigError for options
// that contradict each other).
CompilerConfig cached_config(const CacheOptions& options);

// The cache of one method of this rank. Who is writing: the options' ranks,
// else the calling thread's communicator (tp, pp) and the process
// context's world (process/context.h: rank and size as the MPI layer knows
// them), host and process id; the cache asks MPI nothing itself.
// `store_program` forces the compiled program into stored objects (the
// coordinator always shares it); `summarised`: a coordinator summarises
// the job's entries at rank 0, so this rank's entry lines are debug lines
// (MethodIdentity::summarised) when the job has more than one rank.
// ConfigError for a method name or a hit check the cache cannot use.
std::shared_ptr<MethodCache> method_cache(const nn::Module& module, const CacheOptions& options,
                                          const CompilerConfig& config, bool store_program, bool summarised = false);

// Warns that ge_cache has no effect on a captured (reduce-overhead) method,
// once per process (a setting is said once, not at every construction).
void warn_ineffective_options(const CacheOptions& options, const CompilerConfig& config);

}  // namespace npucache::cache
