#include "compiler/surface.h"

#include <npucache/error.h>

namespace npucache::compiler {
namespace {

constexpr const char* kCudagraphs = "triton.cudagraphs";
constexpr const char* kTraceEnabled = "trace.enabled";
constexpr const char* kDebugDir = "trace.debug_dir";
constexpr const char* kShapeHandling = "enable_shape_handling";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool bool_option(const std::string& key, const OptionValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  throw ConfigError("compile option '" + key + "' takes true or false");
}

// TorchAir's CompilerConfig given as `config` or as an NpuBackend object:
// its mode keeps TorchAir's meaning.
CompilerConfig torchair_config(const CompileOptions& o) {
  if (o.mode)
    throw ConfigError("mode '" + *o.mode +
                      "' is torch.compile's, for the inductor backend; with TorchAir's CompilerConfig "
                      "(config, or an NpuBackend object) set CompilerConfig::mode instead");
  if (o.backend && !o.backend->npu())
    throw ConfigError("backend '" + o.backend->name() +
                      "' and a TorchAir config were both given: pass the config alone or as "
                      "get_npu_backend(config)");
  std::optional<NpuBackend> npu;
  if (o.backend) npu = o.backend->npu();
  return resolve_config(o.config, npu);
}

}  // namespace

std::string_view dynamic_policy_name(DynamicPolicy p) {
  switch (p) {
    case DynamicPolicy::automatic: return "auto";
    case DynamicPolicy::all: return "dynamic";
    case DynamicPolicy::none: return "static";
  }
  return "auto";
}

const std::vector<std::string>& known_option_keys() {
  static const std::vector<std::string> keys = {kCudagraphs, kTraceEnabled, kDebugDir, kShapeHandling};
  return keys;
}

Surface resolve_surface(const CompileOptions& o) {
  Surface s;
  if (o.mode && !o.options.empty())
    throw ConfigError(
        "either mode or options can be given, not both (as torch.compile): mode sets the options "
        "itself");
  bool cudagraphs = false;
  for (const auto& [key, value] : o.options) {
    if (key == kCudagraphs) {
      cudagraphs = bool_option(key, value);
    } else if (key == kTraceEnabled) {
      s.trace_enabled = bool_option(key, value);
    } else if (key == kShapeHandling) {
      s.shape_handling = bool_option(key, value);
    } else if (key == kDebugDir) {
      const std::string* dir = std::get_if<std::string>(&value);
      if (dir == nullptr || dir->empty()) throw ConfigError("compile option 'trace.debug_dir' takes a directory path");
      s.debug_dir = *dir;
    } else {
      throw ConfigError("unknown compile option '" + key + "'; known options: " + join(known_option_keys()));
    }
  }
  const bool torchair = o.config || (o.backend && o.backend->npu()) ||
                        (o.defaults == CompileOptions::Defaults::torchair && !o.backend && !o.mode && !cudagraphs);
  if (torchair) {
    if (o.options.count(kCudagraphs))
      throw ConfigError(
          "compile option 'triton.cudagraphs' is for the inductor backend; with TorchAir's config, "
          "CompilerConfig::mode reduce-overhead captures");
    s.config = torchair_config(o);
    s.description = "TorchAir config, mode " + std::string(compile_mode_name(s.config.mode));
  } else {
    const std::string backend = o.backend ? o.backend->name() : "inductor";
    if (backend == "inductor") {
      const std::string mode = o.mode.value_or("default");
      CompilerConfig& c = s.config;
      if (mode == "default") {
        c.mode = cudagraphs ? CompileMode::reduce_overhead : CompileMode::max_autotune;
        c.autotune = false;
      } else if (mode == "reduce-overhead") {
        c.mode = CompileMode::reduce_overhead;
        c.autotune = false;
      } else if (mode == "max-autotune") {
        c.mode = CompileMode::reduce_overhead;
        c.autotune = true;
      } else if (mode == "max-autotune-no-cudagraphs") {
        c.mode = CompileMode::max_autotune;
        c.autotune = true;
      } else {
        throw ConfigError("unknown mode '" + mode +
                          "' for the inductor backend; expected 'default', 'reduce-overhead', "
                          "'max-autotune' or 'max-autotune-no-cudagraphs'");
      }
      s.description = "inductor, mode " + mode + (cudagraphs ? " with triton.cudagraphs" : "");
    } else if (backend == "npugraphs") {
      if (o.mode)
        throw ConfigError("backend 'npugraphs' takes no mode (got '" + *o.mode +
                          "'): it captures and replays the eager kernels; use backend 'inductor' for modes");
      if (o.options.count(kCudagraphs))
        throw ConfigError("compile option 'triton.cudagraphs' is for the inductor backend; npugraphs always captures");
      s.config.mode = CompileMode::reduce_overhead;
      s.config.eager_kernels = true;
      s.description = "npugraphs";
    } else {
      throw ConfigError("unknown backend '" + backend +
                        "'; expected 'inductor' or 'npugraphs', or an NpuBackend object (get_npu_backend())");
    }
    s.config.validate();
  }
  s.dynamic = !o.dynamic ? DynamicPolicy::automatic : *o.dynamic ? DynamicPolicy::all : DynamicPolicy::none;
  s.fullgraph = o.fullgraph;
  s.disable = o.disable;
  if (o.capture_limit == 0) throw ConfigError("CompileOptions::capture_limit must be at least 1 (captures per method)");
  s.capture_limit = o.capture_limit;
  for (const auto* marks : {&o.mark_dynamic, &o.mark_static})
    for (const auto& m : *marks)
      if (m.input.empty() || m.dim < 0)
        throw ConfigError("a dim mark names an input path (\"arg0\") and a dim >= 0, got '" + m.input + "' dim " +
                          std::to_string(m.dim));
  for (const auto& m : o.mark_dynamic)
    for (const auto& n : o.mark_static)
      if (m == n)
        throw ConfigError("input '" + m.input + "' dim " + std::to_string(m.dim) +
                          " is marked both dynamic and static");
  return s;
}

}  // namespace npucache::compiler
