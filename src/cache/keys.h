// Cache keys.
//
// The lookup key is computed without tracing: model class and parameter
// signature (names, shapes, dtypes; never values), method name, compiler
// config, mode, dynamic, ge_cache, decomposition names, runtime version
// (device properties), cache format version and a code fingerprint (the
// build-id of the binary or shared library holding the model's code, or the
// user's code_version).
//
// The identity components (all but the last three) name model_info, as in
// the seed: <ModelClass>_<dynamic|static>[_aclgraphcache][_gecache]_<hash>.
// The validity components (runtime_version, format_version,
// code_fingerprint) are checked against the stored entry: a mismatch means
// the entry at that path is stale, is reported with the reason, recompiled
// and replaced.
//
// The graph key names the stored artifact: the canonical graph hash, the
// compile config, the runtime version, the decompositions, ge_cache and the
// format version. Ranks and world sizes that trace equal graphs share it.
//
// Every component is stored with the entry, so a miss can be explained.
#pragma once

#include <npucache/compiler_config.h>
#include <npucache/decompositions.h>
#include <npucache/graph.h>
#include <npucache/module.h>

#include <map>
#include <string>
#include <vector>

namespace npucache::cache {

// Bump when the stored layout or serialization changes incompatibly.
constexpr const char* kCacheFormatVersion = "1";

using Components = std::map<std::string, std::string>;

struct LookupKey {
  Components components;
  std::string hash;        // 16 hex digits over every component
  std::string model_info;  // the seed's directory name (identity components)
};

// The components that make an entry at the right path stale.
bool is_validity_component(const std::string& name);

struct KeyInputs {
  const nn::Module* module = nullptr;
  std::string method;
  CompilerConfig config;
  bool dynamic = true;
  bool ge_cache = false;
  const DecompositionTable* decompositions = nullptr;
  std::string code_version;  // empty: the build-id of the model's code
  int device = 0;
};

LookupKey lookup_key(const KeyInputs& in);
std::string graph_key(const Graph& traced, const KeyInputs& in);
// "<model_info>/<func>" or "<model_info>/world<W>global_rank<R>/<func>".
std::string entry_path(const std::string& model_info, const std::string& func, int world_size, int global_rank);

// The simulated device's identity: "simnpu-v1 runtime 1.0.0".
std::string runtime_version(int device);
// "name:f32[64, 64];..." over parameters then buffers, hashed.
std::string parameter_signature(const nn::Module& m);
// "build-id:<hex>" of the ELF object containing `address`, or
// "unknown" when it has none.
std::string code_fingerprint(const void* address);

// "runtime_version: stored 'a', now 'b'" per differing component.
std::vector<std::string> differing_components(const Components& stored, const Components& now);

}  // namespace npucache::cache
