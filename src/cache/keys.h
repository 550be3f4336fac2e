// Cache keys.
//
// The lookup key is computed without tracing: model class and parameter
// signature (names, shapes, dtypes; never values), method name, compiler
// config, mode, dynamic, ge_cache, decomposition names, runtime version,
// cache format version and a code fingerprint (the build-id of the binary
// or shared library holding the model's code, or the user's code_version).
//
// The identity components name model_info, as in the seed:
// <ModelClass>_<dynamic|static>[_aclgraphcache][_gecache]_<hash>. The
// validity components (runtime_version, format_version, code_fingerprint)
// are checked against the stored entry: a mismatch means the entry at that
// path is stale, is reported with the reason, recompiled and replaced.
//
// The graph key names the stored artifact: the canonical graph hash, the
// compile config, the runtime version, the decompositions, ge_cache and the
// format version. Ranks and world sizes that trace equal graphs share it.
//
// Every component is stored with the entry, so a miss can be explained.
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/nn/decompositions.h>
#include <npucache/ir/graph.h>
#include <npucache/module.h>

#include "cache/records.h"

#include <string>
#include <vector>

namespace npucache::cache {

// The component names, in the order they are listed.
namespace component {
inline constexpr const char* kModelClass = "model_class";
inline constexpr const char* kParameterSignature = "parameter_signature";
inline constexpr const char* kMethod = "method";
inline constexpr const char* kConfig = "config";
inline constexpr const char* kMode = "mode";
inline constexpr const char* kDynamic = "dynamic";
inline constexpr const char* kGeCache = "ge_cache";
inline constexpr const char* kDecompositions = "decompositions";
inline constexpr const char* kRuntimeVersion = "runtime_version";
inline constexpr const char* kFormatVersion = "format_version";
inline constexpr const char* kCodeFingerprint = "code_fingerprint";
}  // namespace component

// Every component name (identity ones first, then validity ones).
const std::vector<std::string>& component_names();
// The components that make an entry at the right path stale.
bool is_validity_component(const std::string& name);

struct LookupKey {
  Components components;
  std::string hash;        // 16 hex digits over every component
  std::string model_info;  // the seed's directory name (identity components)
};

struct KeyInputs {
  const nn::Module* module = nullptr;
  std::string method;
  CompilerConfig config;
  bool dynamic = true;
  bool ge_cache = false;
  std::string decompositions = "default";  // decomposition_names()
  std::string code_version;     // empty: the build-id of the model's code
  std::string runtime_version;  // of the device the method runs on
};

LookupKey lookup_key(const KeyInputs& in);

// A traced graph's key and the canonical hash it was computed from (the
// hash is computed once per trace and stored with the object).
struct GraphId {
  std::string key;             // 32 hex digits
  std::string canonical_hash;  // 32 hex digits
};
GraphId graph_id(const Graph& traced, const KeyInputs& in);

// "default", or "op:name,..." for custom decompositions.
std::string decomposition_names(const DecompositionTable& t);
// "name:f32[64, 64];..." over parameters then buffers, hashed.
std::string parameter_signature(const nn::Module& m);
// "build-id:<hex>" of the ELF object containing `address`, or "unknown"
// when it has none.
std::string code_fingerprint(const void* address);

// Only the key components of `c` (other metadata dropped).
Components key_components(const Components& c);
// "runtime_version: stored 'a', now 'b'" per differing component.
std::vector<std::string> differing_components(const Components& stored, const Components& now);

}  // namespace npucache::cache
