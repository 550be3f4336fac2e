// cache_compile: the C++ counterpart of TorchAir's cache_compile.
//
//   auto prompt = npucache::cache_compile(model, &Model::prompt, {.compile = {.method_name = "prompt"}});
//   Tensor logits = prompt(tokens, positions, kv);
//
// The first call looks the method up in the cache (no tracing: the lookup
// key is computed from the module and the options). On a hit the stored
// graph is loaded, checked cheaply against the call's inputs and run: with
// ge_cache (max-autotune) the compiled program itself is stored, otherwise
// the program is recompiled from the stored graph. On a miss the method is
// traced, compiled, run and saved. Log lines (INFO) as the seed's:
//   Cache ModelCacheMeta(name='Model.prompt(x, y)', date='...', version='...', fx=None) saved to <path>
//
// Rules (the seed's, with TorchAir's weaknesses fixed):
// - a graph with RNG ops is refused with an error naming the op; nothing
//   is written;
// - a second trace of the same method (a recompile) warns "Skip cache as
//   <name> recompiled", removes the entry and continues uncached;
// - an entry from another format or runtime version, built from other code
//   (build-id), or corrupt, is reported with the reason and recompiled and
//   replaced; other entries are untouched;
// - ge_cache with reduce-overhead warns that it has no effect;
// - a cache file that is a symlink or owned by another user is refused with
//   the reason; the method then runs uncached.
#pragma once

#include <npucache/compile.h>

#include <optional>
#include <string>
#include <string_view>

namespace npucache {

struct CacheOptions {
  // How the method compiles: config or backend, dynamic, custom
  // decompositions, method_name (${func} in the cache path), arg_names.
  CompileOptions compile;
  // Default: $NPUCACHE_CACHE_DIR, else ".npucache"; relative paths are under
  // the working directory; created (0700) when missing.
  std::string cache_dir;
  // Default: from MPI when it is initialised (the world rank; tp/pp ranks
  // from the thread's current communicator), else 0.
  std::optional<int> global_rank, tp_rank, pp_rank;
  std::optional<int> world_size;
  bool ge_cache = false;
  // Overrides the code fingerprint (the model code's build-id), so caches
  // survive rebuilds the user knows to be unrelated.
  std::string code_version;
};

// What the first call of a cached method did on this rank.
struct MethodReport {
  std::string method;
  std::string graph_key;
  bool hit = false;         // served from this rank's own entry
  bool compiled = false;    // this rank compiled the artifact
  bool fetched = false;     // received the artifact from another rank
  bool read_store = false;  // owner that read the artifact from its store
  int owner = -1;
  double trace_s = 0, compile_s = 0, exchange_s = 0, persist_s = 0, total_s = 0;
  double compile_cpu_s = 0;  // CPU time of the compile (compile_s is elapsed)
  std::size_t bytes_received = 0;
  std::size_t artifact_bytes = 0;
  std::string artifact_checksum;  // of the bytes this rank runs (equal within a key)
  bool writer = false;            // wrote its store's transaction
};

namespace detail {
// The engine of cache_compile: the local cache as its entry source.
std::shared_ptr<CompiledFunction> make_cached_function(const nn::Module& module, const CacheOptions& options);
}  // namespace detail

template <class M, class R, class... P>
CompiledMethod<M, R, P...> cache_compile(M& module, R (M::*method)(P...), CacheOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>,
                "cache_compile accepts only methods of an nn::Module instance");
  return CompiledMethod<M, R, P...>(module, method, detail::make_cached_function(module, options));
}

// Readable text of a cached entry: `path` is the seed's path
// ${cache_dir}/${model_info}/[world.../]${func}. Written to `file` when
// given; returned either way.
std::string readable_cache(const std::string& path, const std::string& file = "");

// Mega-Cache: portable bytes of every entry this process saved or loaded,
// and filling a cache directory (default: the default cache dir) from them.
std::string save_cache_artifacts();
void load_cache_artifacts(std::string_view bytes, const std::string& cache_dir = "");

// The default cache directory ($NPUCACHE_CACHE_DIR or .npucache), absolute.
std::string default_cache_dir();

}  // namespace npucache
