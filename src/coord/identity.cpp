#include "coord/identity.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/mpi.h>

#include "cache/remote_options.h"
#include "compiler/tuning_table.h"
#include "storage/remote_tier.h"

#include <unistd.h>
#include <filesystem>

namespace npucache::coord {

std::string host_name() {
  // The system's bound on a host name, and room for its terminating NUL
  // (gethostname may truncate without one at the bound).
  const long max = ::sysconf(_SC_HOST_NAME_MAX);
  std::string name(static_cast<std::size_t>(max > 0 ? max : 255) + 1, '\0');
  if (::gethostname(name.data(), name.size() - 1) != 0) return "";
  name.resize(name.find('\0'));
  return name;
}

cache::MethodIdentity resolve_identity(const nn::Module& module, const CacheOptions& o, const CompilerConfig& config,
                                       bool store_program) {
  cache::MethodIdentity id;
  id.dir = o.cache_dir.empty() ? default_cache_dir() : std::filesystem::absolute(o.cache_dir).string();
  const bool mpi = MpiSession::initialized();
  Communicator& comm = current_communicator();
  id.who.world_size = o.world_size.value_or(mpi ? MpiSession::world_size() : comm.layout().world_size);
  id.who.global_rank = o.global_rank.value_or(mpi ? MpiSession::world_rank() : comm.global_rank());
  id.who.tp_rank = o.tp_rank.value_or(comm.rank(GroupRole::tp));
  id.who.pp_rank = o.pp_rank.value_or(comm.rank(GroupRole::pp));
  id.who.host = host_name();
  id.who.pid = static_cast<long>(::getpid());
  cache::KeyInputs& k = id.key;
  k.module = &module;
  k.method = o.compile.method_name;
  k.config = config;
  k.dynamic = o.compile.dynamic;
  // A captured method stores its program (beside its capture templates), so
  // a warm start neither lowers nor captures; max-autotune stores it with
  // ge_cache (or when coordinated).
  k.ge_cache = config.captures() || o.ge_cache || store_program;
  k.decompositions = cache::decomposition_names(o.compile.custom_decompositions);
  k.code_version = o.code_version;
  k.runtime_version = compiler::tuning_runtime(current_device());
  if (o.hit_check == HitCheck::code_version && o.code_version.empty())
    throw ConfigError(
        "hit_check = HitCheck::code_version serves stored programs without tracing on the user's word "
        "that code_version changes with the code: set code_version, or use the default HitCheck::trace");
  id.fast_path = o.hit_check == HitCheck::code_version;
  id.remote = cache::resolve_remote(o.remote);
  return id;
}

}  // namespace npucache::coord
