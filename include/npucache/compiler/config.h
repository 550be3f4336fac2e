// Compiler configuration and the backend object that carries it.
//
// CompilerConfig is a value: copyable, equality over every option, a stable
// hash (it feeds cache keys) and a readable dump. validate() throws
// ConfigError naming the first invalid option.
#pragma once

#include <npucache/export.h>

#include <npucache/ir/hash.h>

#include <optional>
#include <string>

namespace npucache {

enum class CompileMode { max_autotune, reduce_overhead };
// "max-autotune" / "reduce-overhead"; parse throws ConfigError.
NPUCACHE_API std::string_view compile_mode_name(CompileMode m);
NPUCACHE_API CompileMode parse_compile_mode(std::string_view name);

// How a replayed task graph receives new inputs (reduce-overhead).
enum class InputHandling { update_address, copy };

struct GeConfig {
  // Run the whole program on one stream (no branch parallelism).
  bool enable_single_stream = false;
  friend bool operator==(const GeConfig&, const GeConfig&) = default;
};

struct NPUCACHE_API CompilerConfig {
  CompileMode mode = CompileMode::max_autotune;
  GeConfig ge_config;
  bool fusion = true;                                            // fuse elementwise/reduction chains
  bool memory_planning = true;                                   // one arena with reused offsets
  int max_streams = 2;                                           // multi-stream mode: streams used at most
  int autotune_candidates = 8;                                   // tilings timed per heavy kernel (max-autotune)
  int autotune_repetitions = 5;                                  // measurements per candidate (best kept)
  int autotune_min_time_us = 200;                                // a measurement repeats the kernel this long
  InputHandling input_handling = InputHandling::update_address;  // reduce-overhead
  // Share autotune decisions through the process's tuning table (and the
  // cache directory's tuning file): a kernel signature tuned before is not
  // timed again. Off: every compile times its kernels (the benchmark's
  // baseline). The program is the same either way, so this option is in
  // neither dump() nor hash() (it does not change cache keys).
  bool shared_tuning = true;
  // Whether heavy kernels get autotuned tilings. Unset (TorchAir's
  // CompilerConfig): max-autotune tunes, reduce-overhead does not; compile()'s
  // torch.compile surface sets it from the backend and mode (docs/GUIDE.md,
  // "The compile surface").
  std::optional<bool> autotune;
  // The npugraphs backend: the graph is decomposed into the eager kernels and
  // captured as it is (no graph passes, no fusion, no code generation).
  bool eager_kernels = false;

  // What a compile with this config does.
  bool tunes() const { return autotune.value_or(mode == CompileMode::max_autotune); }
  bool captures() const { return mode == CompileMode::reduce_overhead; }
  bool generates_code() const { return !eager_kernels; }

  void validate() const;
  // "mode=max-autotune\nge_config.enable_single_stream=false\n..."; autotune
  // and eager_kernels appear only when set (the dumps, and so the hashes and
  // cache keys, of TorchAir's configs do not depend on them).
  std::string dump() const;
  Hash128 hash() const;
  friend bool operator==(const CompilerConfig&, const CompilerConfig&) = default;
};

// The counterpart of torchair.get_npu_backend(compiler_config=...).
class NpuBackend {
 public:
  explicit NpuBackend(CompilerConfig config) : config_(std::move(config)) { config_.validate(); }
  const CompilerConfig& config() const { return config_; }

 private:
  CompilerConfig config_;
};

NPUCACHE_API NpuBackend get_npu_backend(const CompilerConfig& config = {});

// The effective config of a compile: the config, the backend's config, or
// the default. Both given and different: ConfigError "config in current
// backend is different from the config ...".
NPUCACHE_API CompilerConfig resolve_config(const std::optional<CompilerConfig>& config,
                                           const std::optional<NpuBackend>& backend);

}  // namespace npucache
