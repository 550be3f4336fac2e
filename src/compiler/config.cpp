#include <npucache/compiler/config.h>
#include <npucache/error.h>

#include <xxhash.h>

namespace npucache {

std::string_view compile_mode_name(CompileMode m) {
  return m == CompileMode::max_autotune ? "max-autotune" : "reduce-overhead";
}

CompileMode parse_compile_mode(std::string_view name) {
  if (name == "max-autotune") return CompileMode::max_autotune;
  if (name == "reduce-overhead") return CompileMode::reduce_overhead;
  throw ConfigError("unknown compile mode '" + std::string(name) + "'; expected 'max-autotune' or 'reduce-overhead'");
}

void CompilerConfig::validate() const {
  if (mode != CompileMode::max_autotune && mode != CompileMode::reduce_overhead)
    throw ConfigError("CompilerConfig.mode has an invalid value");
  if (max_streams < 1) throw ConfigError("CompilerConfig.max_streams must be >= 1, got " + std::to_string(max_streams));
  if (autotune_candidates < 1)
    throw ConfigError("CompilerConfig.autotune_candidates must be >= 1, got " + std::to_string(autotune_candidates));
  if (autotune_min_time_us < 0)
    throw ConfigError("CompilerConfig.autotune_min_time_us must be >= 0, got " + std::to_string(autotune_min_time_us));
  if (autotune_repetitions < 1)
    throw ConfigError("CompilerConfig.autotune_repetitions must be >= 1, got " + std::to_string(autotune_repetitions));
  if (eager_kernels && autotune.value_or(false))
    throw ConfigError(
        "CompilerConfig.eager_kernels (the npugraphs backend) runs the eager kernels: they have no "
        "tilings to autotune; unset autotune");
  if (eager_kernels && !captures())
    throw ConfigError(
        "CompilerConfig.eager_kernels (the npugraphs backend) captures and replays: it needs "
        "mode reduce-overhead");
}

std::string CompilerConfig::dump() const {
  auto b = [](bool v) { return v ? "true" : "false"; };
  return "mode=" + std::string(compile_mode_name(mode)) + "\n" +
         "ge_config.enable_single_stream=" + b(ge_config.enable_single_stream) + "\n" + "fusion=" + b(fusion) + "\n" +
         "memory_planning=" + b(memory_planning) + "\n" + "max_streams=" + std::to_string(max_streams) + "\n" +
         "autotune_candidates=" + std::to_string(autotune_candidates) + "\n" +
         "autotune_repetitions=" + std::to_string(autotune_repetitions) + "\n" +
         "autotune_min_time_us=" + std::to_string(autotune_min_time_us) + "\n" +
         "input_handling=" + (input_handling == InputHandling::update_address ? "update_address" : "copy") + "\n" +
         (autotune ? "autotune=" + std::string(b(*autotune)) + "\n" : "") +
         (eager_kernels ? "eager_kernels=true\n" : "");
}

Hash128 CompilerConfig::hash() const {
  // The dump names every option with its value: hashing it keeps the hash
  // stable across builds and sensitive to every option.
  const std::string d = dump();
  XXH128_hash_t h = XXH3_128bits(d.data(), d.size());
  return {h.high64, h.low64};
}

NpuBackend get_npu_backend(const CompilerConfig& config) { return NpuBackend(config); }

CompilerConfig resolve_config(const std::optional<CompilerConfig>& config, const std::optional<NpuBackend>& backend) {
  if (config && backend && !(*config == backend->config()))
    throw ConfigError(
        "config in current backend is different from the config passed to the "
        "compile: pass only one of them, or the same config.\nbackend:\n" +
        backend->config().dump() + "config:\n" + config->dump());
  CompilerConfig c = config ? *config : backend ? backend->config() : CompilerConfig{};
  c.validate();
  return c;
}

}  // namespace npucache
