// cache_compile: the C++ counterpart of TorchAir's cache_compile.
//
//   auto prompt = npucache::cache_compile(model, &Model::prompt);
//   Tensor logits = prompt(tokens, positions, kv);  // loads, or traces + compiles + saves
//
// The entry of a method is ${cache_dir}/${model_info}/[world<W>global_rank<R>/]${func}
// (docs/FORMAT.md): model_info names the model (its fully qualified class,
// dynamic or static, the mode keywords, a hash of its parameter signature
// and compile settings); ${func} is the method's own name ("prompt" for
// &Model::prompt) unless options.compile.method_name gives one.
//
// How a hit is decided (HitCheck::trace, the default): the first call of a
// process traces the method with its arguments and serves the stored
// program only when the traced graph, its guards and input signature and
// the compile settings equal those the entry was made from, and the entry
// is of this runtime and format version. Anything else is a miss with its
// reason in words ("the computation differs (graph: node mul_3 (full):
// constant 1 stored, 3 now)"), recompiled and the entry replaced. So a
// changed method body or hyper-parameter is never served stale, and every
// program with the same model code shares the cache. HitCheck::code_version
// skips the trace (TorchAir's behaviour) and trusts code_version: a stale
// program is then served if the code changes and code_version does not.
//
// With ge_cache (max-autotune) the compiled program is stored; without it
// the graph after the compiler's graph passes and the autotune decisions
// are, and a hit lowers them (no graph passes, no autotuning). Log lines
// (INFO) as the seed's:
//   Cache ModelCacheMeta(name='Model.prompt(x, y)', date='...', version='...', fx=None) saved to <entry>/compiled_module
// CompiledMethod::status() tells what happened (hit, compiled, and why).
//
// Rules (the seed's, with TorchAir's weaknesses fixed):
// - a graph with RNG ops is refused with an error naming the op; nothing
//   is written;
// - a later call that matches no stored signature (a recompile) warns
//   "Skip cache as <name> recompiled" with the guard or shape that failed,
//   removes the entry and continues uncached;
// - an entry of another format or runtime version, or a corrupt one, is
//   reported with the reason, recompiled and replaced; other entries are
//   untouched;
// - ge_cache with reduce-overhead warns that it has no effect;
// - a cache file that is a symlink or owned by another user is refused with
//   the reason; the method then runs uncached.
#pragma once

#include <npucache/export.h>

#include <npucache/compile.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npucache {

// How a stored program is accepted on a method's first call in a process.
enum class HitCheck {
  // The default: trace the method (cheap next to a compile) and serve the
  // stored program only when the graph, guards and input signature equal
  // the stored ones. A changed method body, hyper-parameter or guard is a
  // miss with its reason, recompiled and replaced.
  trace,
  // TorchAir's behaviour, opt-in: no trace; the stored program is served
  // when code_version (and the parameter signature, runtime and format
  // version) match. The user vouches that code_version changes whenever
  // the computation does; a stale program is served silently otherwise.
  code_version,
};

namespace detail {
// cache_compile's defaults are the seed's, not torch.compile's: dynamic
// shapes on, one full graph, TorchAir's default CompilerConfig unless a
// backend, mode or config is given.
inline CompileOptions seed_compile_defaults() {
  CompileOptions o;
  o.dynamic = true;
  o.fullgraph = true;
  o.defaults = CompileOptions::Defaults::torchair;
  return o;
}
}  // namespace detail

// The remote tier (docs/GUIDE.md, "The remote tier"): a Redis server behind
// the local cache, shared by a fleet. A miss of the local cache is looked
// up there before compiling; everything read is checked like a local file
// and then committed to the local cache, so the next start is local; what
// this process compiles is written back. A remote that fails (refused,
// slow, full, wrong password, damaged values) never fails a job: it is
// warned about once, counted in `npucache stats`, and the job goes on with
// the local cache and compiles. No remote is contacted unless one is set.
struct RemoteOptions {
  // redis://[user:password@]host[:port][/db][?attr=value&...],
  // redis+unix:///path/to/socket[?db=N&...] or file:///shared/directory
  // (a directory every host mounts); empty: $NPUCACHE_REMOTE;
  // "off": none, whatever the environment says. Attributes: read-only,
  // connect-timeout, timeout, max-object (e.g. ?read-only&timeout=2s).
  // The password comes from $NPUCACHE_REMOTE_PASSWORD or the file named by
  // $NPUCACHE_REMOTE_PASSWORD_FILE (one in the URL works but warns: it
  // shows in process listings).
  std::string url;
  // Each, when set, overrides the URL's attribute.
  std::optional<bool> read_only;                // never write (consumers)
  std::optional<double> connect_timeout_s;      // default 0.1
  std::optional<double> timeout_s;              // of each operation; default 5
  std::optional<std::size_t> max_object_bytes;  // larger objects are not sent; default 64 MiB
  // Signed publishing (docs/GUIDE.md, "Signed publishing"). The signing.key
  // file (`npucache remote keygen DIR`) whose key signs what this process
  // writes; empty: $NPUCACHE_REMOTE_SIGNING_KEY.
  std::string signing_key_file;
  // The file of trusted public keys (signing.pub lines, one a line): when
  // set, only values signed by one of them are used, others are counted
  // `untrusted`; empty: $NPUCACHE_REMOTE_TRUSTED_KEYS. A file that cannot
  // be used is a ConfigError here; from the environment it is warned about
  // and the remote is not used.
  std::string trusted_keys_file;
};

struct CacheOptions {
  // How the method compiles: config or backend, mode, dynamic (default
  // true, as the seed's; unset asks for automatic dynamic, whose decisions
  // are kept in the cache directory), fullgraph (default true; false caches
  // the pieces between graph breaks), custom decompositions, method_name
  // (${func} in the cache path), arg_names.
  CompileOptions compile = detail::seed_compile_defaults();
  // Default: $NPUCACHE_CACHE_DIR, else ".npucache"; relative paths are under
  // the working directory; created (0700) when missing.
  std::string cache_dir;
  // Default: from MPI when it is initialised (the world rank; tp/pp ranks
  // from the thread's current communicator), else 0.
  std::optional<int> global_rank, tp_rank, pp_rank;
  std::optional<int> world_size;
  bool ge_cache = false;
  // How a stored program is accepted (see "How a hit is decided" above).
  HitCheck hit_check = HitCheck::trace;
  // The user's version of the model code. Required by HitCheck::code_version,
  // where it is what a hit is decided by; recorded with every entry.
  std::string code_version;
  // The remote tier (none unless set here or by $NPUCACHE_REMOTE).
  RemoteOptions remote;
};

// Where a warm start's time went: the phases of a first call served from
// this rank's own entry, seconds on a steady clock (docs/ARCHITECTURE.md,
// "Where a warm start's time goes"). A phase that did not run is 0 (a
// fast-path hit traces nothing; a function only prepared runs nothing);
// of a call not served from its own entry, read_s, decode_s and own_key_s
// are 0 and bind_s is the engine's part alone. The phases lie within
// ready_s + first_run_s.
struct WarmPhases {
  double trace_s = 0;      // tracing the method (the verifying hit check)
  double key_s = 0;        // the graph key (cache key) of that trace
  double read_s = 0;       // the entry and its object read: file reads, envelope checks, decompression
  double decode_s = 0;     // the program deserialized and validated
  double own_key_s = 0;    // the graph key of the stored program's own trace recomputed (the mix-up rule)
  double bind_s = 0;       // made runnable: tuning merged, bound to the call, parameters resolved, bind plan
  double first_run_s = 0;  // the first call's execution (0 when the function was only prepared)
  double ready_s = 0;      // the first call from its start to runnable (before its first run)
};

// What the first call of a cached method did on this rank.
struct MethodReport {
  std::string method;
  std::string graph_key;
  bool hit = false;              // served from this rank's own entry
  bool compiled = false;         // this rank compiled the artifact
  bool fetched = false;          // received the artifact from another rank
  bool read_store = false;       // owner that read the artifact from its store
  bool remote = false;           // the artifact came from the remote tier (this rank read it)
  std::size_t remote_bytes = 0;  // bytes this rank read from the remote tier
  int owner = -1;
  double trace_s = 0, compile_s = 0, exchange_s = 0, persist_s = 0, total_s = 0;
  double compile_cpu_s = 0;  // CPU time of the compile (compile_s is elapsed)
  std::size_t bytes_received = 0;
  std::size_t artifact_bytes = 0;
  std::string artifact_checksum;  // of the bytes this rank runs (equal within a key)
  bool writer = false;            // wrote its store's transaction
  bool saved = false;             // this rank's entry was written
  std::string reason;             // why the lookup missed ("absent", "stale (...)", ...)
  // The miss's cause, the same on every rank one change touched ("absent:
  // another layout (stored world 8 tp 2 pp 4, now world 4 tp 2 pp 2)",
  // "absent: first run", ...); empty on a hit.
  std::string cause;
  // Seconds of each compiler pass when this rank compiled, in pipeline
  // order ("decompose", "fusion", "autotune", ...).
  std::vector<std::pair<std::string, double>> pass_times_s;
  // When this rank compiled: the kernel signatures it timed, and those it
  // took from the tuning table (tuned by an earlier compile of the process
  // or job, or another model of the same shapes).
  int kernels_tuned = 0;
  int kernels_reused = 0;
  // When this rank compiled a method that calls compile regions: the
  // regions it compiled, and those it took compiled from the store
  // (compiled before by any method, model, layout or process, or now by
  // another rank of the job sharing the store: `regions_waited` of them
  // after waiting for it). docs/GUIDE.md, "Compile regions".
  int regions_compiled = 0;
  int regions_reused = 0;
  int regions_waited = 0;
  // Region files this rank wrote into its store that were compiled
  // elsewhere: received from the rank of another store that compiled them
  // for both (the region waves), or taken from a program it brought into
  // its store (received from a rank of another store, or read from a
  // signed remote tier). A later job on that store compiles none of them.
  int regions_copied = 0;
  // A record of a later call (dist::reports()): automatic dynamic needed a
  // new graph after the first call. How this rank obtained it: "stored"
  // (in its store before the call), "compiled" (it claimed the graph and
  // compiled it), "loaded" (another rank of the job compiled it: read from
  // the shared store after waiting `later_wait_s`), "waited_then_compiled"
  // (the claimer's object did not come within the wait, or was refused).
  // Empty for a first call's record.
  std::string later;
  double later_wait_s = 0;
  // The first call's phases (a later call's record has none).
  WarmPhases warm;
};

namespace detail {
// The engine of cache_compile: the local cache as its entry source.
NPUCACHE_API std::shared_ptr<CompiledFunction> make_cached_function(const nn::Module& module,
                                                                    const CacheOptions& options);
}  // namespace detail

template <class M, class R, class... P>
CompiledMethod<M, R, P...> cache_compile(M& module, R (M::*method)(P...), CacheOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "cache_compile accepts only methods of an nn::Module instance");
  options.compile.method_name =
      detail::default_method_name(options.compile.method_name, method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_cached_function(module, options));
}
// A const method is cached the same way.
template <class M, class R, class... P>
CompiledMethod<M, R, P...> cache_compile(M& module, R (M::*method)(P...) const, CacheOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "cache_compile accepts only methods of an nn::Module instance");
  options.compile.method_name =
      detail::default_method_name(options.compile.method_name, method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_cached_function(module, options));
}

// Readable text of a cached entry: `path` is the seed's path
// ${cache_dir}/${model_info}/[world.../]${func}. Written to `file` when
// given; returned either way.
NPUCACHE_API std::string readable_cache(const std::string& path, const std::string& file = "");

// Mega-Cache: portable bytes of every entry this process saved or loaded,
// and filling a cache directory (default: the default cache dir) from them.
NPUCACHE_API std::string save_cache_artifacts();
NPUCACHE_API void load_cache_artifacts(std::string_view bytes, const std::string& cache_dir = "");

// The default cache directory, absolute: $NPUCACHE_CACHE_DIR, else the
// cache_dir of the user's npucache.conf
// ($XDG_CONFIG_HOME/npucache/npucache.conf, else
// ~/.config/npucache/npucache.conf), else .npucache. ConfigError when that
// file is bad (naming its line).
NPUCACHE_API std::string default_cache_dir();

}  // namespace npucache
