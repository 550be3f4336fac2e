// Cache keys (docs/FORMAT.md, "How a hit is decided").
//
// model_info names one model: <ModelClass>_<dynamic|static|auto>[_aclgraphcache]
// _<hash>, the hash over the model components (fully qualified class,
// parameter signature: names, shapes and dtypes, never values; compiler
// config, mode, dynamic, decompositions) and the format version (each
// format version has index files of its own). Every method of the model
// sits side by side under it. ge_cache is recorded but is not a model
// component: it decides whether a save stores the program or the graph,
// and single-process and distributed caches (which store programs) of a
// model share its entries.
//
// An entry (<model_info>/[world<W>global_rank<R>/]<func>) records the
// method and the validity components: runtime version and format version
// (a difference makes the entry stale) and the user's code_version.
//
// The graph key names the stored artifact: the canonical hash of the traced
// graph, the input signature (inputs, guards, shape guards, output paths),
// compile config, runtime version, decompositions, dynamic and the format
// version. By default a stored program is served
// only when the graph key of this process's trace equals the entry's: a
// changed method body, hyper-parameter or guard is a miss with its reason.
// Ranks and world sizes that trace equal graphs share one artifact.
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/ir/graph.h>
#include <npucache/module.h>
#include <npucache/nn/decompositions.h>
#include <npucache/trace.h>

#include "format/records.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace npucache::format {

// The component names.
namespace component {
inline constexpr const char* kModelClass = "model_class";
inline constexpr const char* kParameterSignature = "parameter_signature";
inline constexpr const char* kConfig = "config";
inline constexpr const char* kMode = "mode";
inline constexpr const char* kDynamic = "dynamic";
inline constexpr const char* kGeCache = "ge_cache";
inline constexpr const char* kDecompositions = "decompositions";
inline constexpr const char* kMethod = "method";
inline constexpr const char* kRuntimeVersion = "runtime_version";
inline constexpr const char* kFormatVersion = "format_version";
inline constexpr const char* kCodeVersion = "code_version";
// The config's options as text ("fusion=true; max_streams=2; ..."): not a
// key component (kConfig hashes it), recorded so that `explain` can name
// the option that differs.
inline constexpr const char* kConfigOptions = "config_options";
// The parameters and buffers as text ("p:<name>:<type>;" each, then
// "b:<name>:<type>;"): not a key component (parameter_signature hashes
// it), recorded once per model so that a lookup and `explain` can name the
// first parameter whose name, shape or dtype differs. Left out (empty)
// when longer than kMaxParameterList; absent from entries written before it.
inline constexpr const char* kParameterList = "parameter_list";
}  // namespace component

// The longest parameter list recorded: 64 KiB, Llama-3-70B's 80 layers (40
// KiB) and more. The model record holds it in a zstd frame and the HDF5
// view as a compressed dataset, a line per parameter (format 10.0.0; 32 KiB
// before, an attribute). Every entry read carries a copy of the model's
// components, so a reader refuses a longer one: an index cannot make each
// of its entries cost more than this.
inline constexpr std::size_t kMaxParameterList = 64 * 1024;

// Every component name: the model components (hashed into model_info),
// then method, runtime_version, format_version, code_version.
const std::vector<std::string>& component_names();

struct LookupKey {
  Components components;
  std::string hash;        // 16 hex digits over every component
  std::string model_info;  // the seed's directory name (model components)
};

struct KeyInputs {
  const nn::Module* module = nullptr;
  std::string method;
  CompilerConfig config;
  // true, false, or unset (automatic dynamic: "auto" in model_info; the
  // dims it made dynamic are in the traced graph, so in the graph key).
  std::optional<bool> dynamic = true;
  bool ge_cache = false;
  std::string decompositions = "default";  // decomposition_names()
  std::string code_version;
  std::string runtime_version;  // of the device the method runs on
};

LookupKey lookup_key(const KeyInputs& in);

// A trace's graph key and the canonical hash of its graph (computed once
// per trace and stored with the object).
struct GraphId {
  std::string key;             // 32 hex digits
  std::string canonical_hash;  // 32 hex digits
};
GraphId graph_id(const TraceResult& traced, const KeyInputs& in);

// "default", or "op:name,..." for custom decompositions.
std::string decomposition_names(const DecompositionTable& t);
// Hash of "name:f32[64, 64];..." over parameters then buffers.
std::string parameter_signature(const nn::Module& m);
// The text parameter_signature hashes (component kParameterList).
std::string parameter_list(const nn::Module& m);
// The first parameter or buffer whose name, shape or dtype differs between
// two parameter lists, in words ("parameter layers.0.w: stored f32[64, 32],
// now f32[32, 32]"; by position when the names differ: "parameter #3:
// stored a f32[8], now b f32[8]"); empty when either list is unknown
// (empty) or they are equal.
std::string first_parameter_difference(const std::string& stored, const std::string& now);

// Only the key components of `c` (other metadata dropped; the parameter
// list and config options are kept as records of the model).
Components key_components(const Components& c);
// Only the model components of `c` (those hashed into model_info).
Components model_components(const Components& c);
// "runtime_version: stored 'a', now 'b'" for each component of `now`
// whose stored value differs. The identity of an entry path covers the
// model components and the method; what remains to compare is validity:
// runtime and format version always, and, on the fast path (no trace),
// code_version and the parameter signature. The parameter list is a
// record, never compared here (first_parameter_difference names it).
std::vector<std::string> stale_components(const Components& stored, const Components& now, bool fast_path);
std::vector<std::string> differing_components(const Components& stored, const Components& now);
// What separates an entry made with `stored` components from a lookup with
// `now`: each differing model component, the config named option by
// option ("config option autotune_candidates: stored '8', now '3'"), the
// parameter signature by its first differing parameter when both sides
// recorded their parameter lists.
std::vector<std::string> model_differences(const Components& stored, const Components& now);

}  // namespace npucache::format
