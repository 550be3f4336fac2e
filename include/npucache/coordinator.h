// The MPI cache coordinator: dist::cache_compile.
//
// Under mpirun every rank calls the same cached methods in the same order
// (SPMD). On the first call of a method the ranks, collectively:
//  1. check their own layout entry world<W>global_rank<R>/<func>, then
//     agree (one all-reduce) that they all call the same method and whether
//     every rank hit; if so each loads and nothing else happens;
//  2. the ranks that miss trace and compute graph keys;
//  3. all-gather graph keys, estimated compile cost, who already holds
//     which artifact in its store, and each rank's store identity (the id
//     in the store's marker file with the directory's device and inode:
//     one directory shared by hosts is one store, node-local directories of
//     the same path are different stores);
//  4. plan: ranks grouped by graph key, one owner per key (a holder if there
//     is one, otherwise the compiles are spread over the ranks by cost);
//  5. owners compile (or read) the artifact; the artifact crosses the
//     network once per host (one rank per host receives it, in a tree over
//     the hosts, and passes it on within its host), so every rank of a
//     group runs the same bytes;
//  6. persist: one writer per store (its lowest rank) commits the new
//     entries of every rank sharing it, every entry pointing at the one
//     stored copy of its artifact; when another process stored the key
//     first, the ranks of that store run the bytes it kept.
// After each phase in which a rank can fail on its own, the ranks agree on
// the outcome: a rank's own failure reaches every rank at once as the same
// error, of the failing rank's class (a ConfigError stays a ConfigError),
// naming the rank, the phase and the cause; a cache that cannot be used or
// written at one rank (refused, read-only, a full disk at a store's
// writer) makes every rank run the method uncached, each warned once.
// Every collective and transfer is bounded by `timeout_s`: a rank that
// stops, dies, is cut off or runs something else makes every rank that can
// still speak throw TimeoutError naming the step and the missing ranks
// (mpi::Comm's roll call), instead of hanging; the job must then end.
//
// The coordinator always shares and stores the compiled DeviceProgram (the
// ge_cache level): sharing the graph alone would make every rank compile.
// `independent` makes every rank trace, compile and save on its own (the
// baseline of existing systems).
#pragma once

#include <npucache/export.h>

#include <npucache/cache.h>
#include <npucache/error.h>

#include <string>
#include <vector>

namespace npucache::dist {

struct CoordinatorOptions {
  // Bound of each collective and transfer, seconds: positive and finite
  // (ConfigError otherwise). It must cover the longest compile of an owner,
  // which the other ranks wait for.
  double timeout_s = 120.0;
  bool independent = false;
  // The artifact goes from its owner to its group in one binomial tree over
  // ranks, ignoring hosts (the baseline of benchmarks), instead of once per
  // host.
  bool flat_exchange = false;
  // Ranks of different cache directories (node-local caches) compile a
  // compile region their programs share once per job, in two waves: its
  // compiler first, then the others taking it (docs/GUIDE.md, "Repeated
  // layers: compile regions"). Off, each directory's ranks compile it in
  // parallel: more compile CPU, no second wave. A rank with it off takes no
  // part in the waves; the others still meet.
  bool region_waves = true;
  // A dry run: the first call of each method runs the arrival (each rank's
  // lookup), the key all-gather, the plan and the remote tier's reads (as
  // a check: nothing is kept), then records what this rank would do in
  // reports() (hit: load its entry; fetched from `owner`; remote; read_store;
  // compiled, with the nearest stored entry in `reason`) and throws
  // DryRunEnd instead of compiling. The process writes nothing to any
  // cache from then on (no entries, objects, statistics, profiles,
  // templates, remote writes): the prediction is of one store state, and a
  // real run on that state does what it says (a rank whose cache cannot be
  // used makes the method uncached in both; `reason` then begins
  // "uncached"). Not with `independent`. A process is a dry run or a real
  // one: building a dry-run function in a process that built cached
  // functions that write, or such a function in a dry-run process, throws
  // ConfigError.
  bool dry_run = false;
  // A new shape after the first call (automatic dynamic): no collective;
  // the first rank to need the new graph claims it in its store and
  // compiles, the others of that store load its object (docs/GUIDE.md,
  // "A new shape under MPI"). A waiting rank reads the store every
  // `shape_poll_s` seconds and compiles itself after `shape_wait_s`
  // seconds (a claimer that died frees its claim at once). Both positive
  // and finite, the poll no longer than the wait (ConfigError otherwise).
  double shape_wait_s = 60.0;
  double shape_poll_s = 0.05;
};

// The end of a dry run's first call (CoordinatorOptions::dry_run): the
// method was predicted, not compiled; its report is in reports().
class NPUCACHE_API DryRunEnd : public Error {
 public:
  using Error::Error;
};

// What the coordinator did for one method on this rank, step by step
// (seconds; docs/SCALING.md models each), and the bytes it moved (the
// artifact travels as a compressed one-object bundle).
struct StepReport {
  std::string method;
  int hosts = 1;         // hosts (shared-memory nodes) of the job; 0 when every rank hit before any
                         // method needed the map of hosts (the job report counts host names then)
  double setup_s = 0;    // the coordinator's communicator and host map (a process's first method)
  double lookup_s = 0;   // this rank's own entry: trace, lookup, and on a hit the load
  double arrival_s = 0;  // agreeing on the method and on whether every rank hit
  double keys_s = 0;     // all-gather of graph keys, costs, holdings and stores
  double plan_s = 0;
  double remote_s = 0;    // reading keys no store holds from the remote tier (one rank per host) and agreeing
  double produce_s = 0;   // owners: compile or read the artifact
  double status_s = 0;    // agreeing on the compile's outcome
  double exchange_s = 0;  // the artifact from its owner to its group
  double load_s = 0;      // preparing the received program, and agreeing on the exchange's and loads' outcome
  double persist_s = 0;   // one writer per store saves every rank's entry, and agreeing on the outcome
  double save_s = 0;      // of which the writer's save itself
  bool all_hit = false;   // every rank hit: steps after arrival did not run
  // When the method's coordination started and ended, seconds on the
  // machine's monotonic clock: comparable across the ranks of one machine
  // (the simulated hosts share it), for the critical path of a step.
  double started_at = 0, ended_at = 0;
  std::size_t key_bytes = 0;                 // bytes of the key all-gather this rank received
  std::size_t bytes_between_hosts = 0;       // artifact bytes this rank received from another host
  std::size_t flat_bytes_between_hosts = 0;  // what it would have, had every rank its own copy from the owner
  int entries_written = 0;                   // entries this rank wrote as its store's writer
};

// Every report of this process's coordinated methods, in call order.
NPUCACHE_API std::vector<MethodReport> reports();
// The coordinator's steps of the same methods (independent methods have none).
NPUCACHE_API std::vector<StepReport> step_reports();
NPUCACHE_API void clear_reports();

namespace detail {
NPUCACHE_API std::shared_ptr<npucache::detail::CompiledFunction> make_coordinated_function(
    const nn::Module& module, const CacheOptions& options, const CoordinatorOptions& coord);
}  // namespace detail

template <class M, class R, class... P>
CompiledMethod<M, R, P...> cache_compile(M& module, R (M::*method)(P...), CacheOptions options = {},
                                         CoordinatorOptions coord = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "cache_compile accepts only methods of an nn::Module instance");
  options.compile.method_name = npucache::detail::default_method_name(options.compile.method_name,
                                                                      method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_coordinated_function(module, options, coord));
}
// A const method is cached the same way.
template <class M, class R, class... P>
CompiledMethod<M, R, P...> cache_compile(M& module, R (M::*method)(P...) const, CacheOptions options = {},
                                         CoordinatorOptions coord = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "cache_compile accepts only methods of an nn::Module instance");
  options.compile.method_name = npucache::detail::default_method_name(options.compile.method_name,
                                                                      method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_coordinated_function(module, options, coord));
}

}  // namespace npucache::dist
