// Who is writing a cached method, resolved once where the process's
// identity is known: the cache directory, the rank (options, else the
// current communicator, else MPI), the host and process, and the runtime
// version of the device the method runs on. The cache layer is given this;
// it discovers nothing itself.
#pragma once

#include <npucache/cache.h>

#include "cache/method_cache.h"

namespace npucache::coord {

// `config` is the resolved compiler config; `store_program` forces the
// compiled program into stored objects (the coordinator always shares it).
cache::MethodIdentity resolve_identity(const nn::Module& module, const CacheOptions& options,
                                       const CompilerConfig& config, bool store_program);

// This host's name (gethostname), as the coordinator's host map and the
// producer records give it.
std::string host_name();

}  // namespace npucache::coord
