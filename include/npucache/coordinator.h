// The MPI cache coordinator: dist::cache_compile.
//
// Under mpirun every rank calls the same cached methods in the same order
// (SPMD). On the first call of a method the ranks, collectively:
//  1. check their own layout entry world<W>global_rank<R>/<func>; if every
//     rank hits, each loads and nothing else happens;
//  2. the ranks that miss trace and compute graph keys;
//  3. all-gather graph keys, estimated compile cost, and who already holds
//     which artifact in its store (node-local stores may differ);
//  4. plan: ranks grouped by graph key, one owner per key (a holder if there
//     is one, otherwise the compiles are spread over the ranks by cost);
//  5. owners compile (or read) the artifact and broadcast it in a
//     communicator per key group, chunked; every rank of a group runs the
//     same bytes;
//  6. persist: one writer per store (ranks sharing a cache_dir on one host
//     elect the lowest rank), every new layout entry pointing at the one
//     stored copy of its artifact.
// Errors are agreed: an owner's failure reaches every rank as a CommError
// naming the rank and the method; a rank that never arrives gives the
// others a CommError after `timeout_s`, not a hang.
//
// The coordinator always shares and stores the compiled DeviceProgram (the
// ge_cache level): sharing the graph alone would make every rank compile.
// `independent` makes every rank trace, compile and save on its own (the
// baseline of existing systems).
#pragma once

#include <npucache/cache.h>

#include <string>
#include <vector>

namespace npucache::dist {

struct CoordinatorOptions {
  double timeout_s = 120.0;
  bool independent = false;
};

// Every report of this process's coordinated methods, in call order.
std::vector<MethodReport> reports();
void clear_reports();

namespace detail {
std::shared_ptr<npucache::detail::CompiledFunction> make_coordinated_function(const nn::Module& module,
                                                                              const CacheOptions& options,
                                                                              const CoordinatorOptions& coord);
}  // namespace detail

template <class M, class R, class... P>
CompiledMethod<M, R, P...> cache_compile(M& module, R (M::*method)(P...), CacheOptions options = {},
                                         CoordinatorOptions coord = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>,
                "cache_compile accepts only methods of an nn::Module instance");
  options.compile.method_name = npucache::detail::default_method_name(options.compile.method_name,
                                                                      method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_coordinated_function(module, options, coord));
}

}  // namespace npucache::dist
