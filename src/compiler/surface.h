// The compile surface resolved: what compile()'s and cache_compile()'s
// options (torch.compile's backend, mode, options, dynamic, fullgraph,
// disable; TorchAir's CompilerConfig) ask the engine to do.
//
// resolve_surface() is the one place the options are interpreted, with the
// table of docs/GUIDE.md ("The compile surface"); it throws ConfigError
// for what torch.compile refuses (mode and options together, an unknown
// backend, mode or option key, a mode with npugraphs) and for what
// contradicts TorchAir's config (a config differing from the backend's).
#pragma once

#include <npucache/compile.h>

#include <cstddef>
#include <string>

namespace npucache::compiler {

// How input dims become symbols.
enum class DynamicPolicy {
  automatic,  // dynamic unset: static first, dims that change turn dynamic
  all,        // dynamic=true
  none,       // dynamic=false
};
std::string_view dynamic_policy_name(DynamicPolicy p);  // "auto", "dynamic", "static"

struct Surface {
  CompilerConfig config;  // the effective config (capture, tuning, codegen)
  DynamicPolicy dynamic = DynamicPolicy::automatic;
  bool fullgraph = false;
  bool disable = false;
  bool trace_enabled = false;
  std::string debug_dir = "npucache_debug";
  bool shape_handling = false;
  std::size_t capture_limit = 64;
  // For messages: "inductor, mode reduce-overhead", "npugraphs", "TorchAir config".
  std::string description;
};

Surface resolve_surface(const CompileOptions& o);

// The option keys compile() accepts, for messages.
const std::vector<std::string>& known_option_keys();

}  // namespace npucache::compiler
