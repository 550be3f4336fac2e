#include "cache/keys.h"

#include <npucache/ir/hash.h>

#include "cache/layout.h"

#include <xxhash.h>

#include <cctype>
#include <cstdio>

namespace npucache::cache {
namespace {

bool is_model_component(const std::string& name);

std::string hash_components(const Components& c, bool model_only) {
  std::string s;
  for (const auto& [k, v] : c)
    if (!model_only || is_model_component(k)) s += k + "=" + v + "\n";
  return checksum(s);
}

// A class name as a directory name: "a::b::Model<int>" -> "a.b.Model_int_",
// "(anonymous namespace)::M" -> "anonymous.M". (model_info's hash covers
// the exact name, so names made equal here never share an entry.)
std::string path_safe(const std::string& name) {
  static const std::string anonymous = "(anonymous namespace)";
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name.compare(i, anonymous.size(), anonymous) == 0) {
      out += "anonymous";
      i += anonymous.size() - 1;
    } else if (name.compare(i, 2, "::") == 0) {
      out += '.';
      ++i;
    } else {
      const char c = name[i];
      out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ? c : '_';
    }
  }
  return out;
}

// The input signature as text: what a later call must match.
std::string signature_text(const TraceResult& t) {
  std::string s;
  for (const auto& in : t.signature.inputs) s += "in " + in.path + " " + type_str(in.type) + "\n";
  for (const auto& g : t.signature.guards) s += "guard " + g.path + "=" + g.value + "\n";
  for (const auto& g : t.signature.shape_guards) s += "shape " + g + "\n";
  for (const auto& o : t.output_paths) s += "out " + o + "\n";
  return s;
}

}  // namespace

std::string decomposition_names(const DecompositionTable& t) {
  if (t.empty()) return "default";
  std::string s;
  for (const auto& [op, d] : t) s += (s.empty() ? "" : ",") + std::string(op_name(op)) + ":" + d.name;
  return s;
}

const std::vector<std::string>& component_names() {
  using namespace component;
  static const std::vector<std::string> names = {
      kModelClass, kParameterSignature, kConfig,        kMode,       kDynamic, kGeCache, kDecompositions,
      kMethod,     kRuntimeVersion,     kFormatVersion, kCodeVersion};
  return names;
}

namespace {
// The components hashed into model_info.
bool is_model_component(const std::string& name) {
  using namespace component;
  return name != kMethod && name != kRuntimeVersion && name != kFormatVersion && name != kCodeVersion;
}
}  // namespace

Components model_components(const Components& c) {
  Components out;
  for (const auto& n : component_names())
    if (auto it = c.find(n); it != c.end() && is_model_component(n)) out.emplace(n, it->second);
  return out;
}

Components key_components(const Components& c) {
  Components out;
  for (const auto& n : component_names())
    if (auto it = c.find(n); it != c.end()) out.emplace(n, it->second);
  return out;
}

std::string parameter_signature(const nn::Module& m) {
  std::string s;
  for (const auto& [n, t] : m.named_parameters()) s += "p:" + n + ":" + type_str(t.type()) + ";";
  for (const auto& [n, t] : m.named_buffers()) s += "b:" + n + ":" + type_str(t.type()) + ";";
  return checksum(s);
}

LookupKey lookup_key(const KeyInputs& in) {
  LookupKey k;
  Components& c = k.components;
  using namespace component;
  c[kModelClass] = in.module->type_name();
  c[kParameterSignature] = parameter_signature(*in.module);
  c[kMethod] = in.method;
  c[kConfig] = in.config.hash().hex().substr(0, 16);
  c[kMode] = std::string(compile_mode_name(in.config.mode));
  c[kDynamic] = in.dynamic ? "true" : "false";
  c[kGeCache] = in.ge_cache ? "true" : "false";
  c[kDecompositions] = in.decompositions;
  c[kRuntimeVersion] = in.runtime_version;
  c[kFormatVersion] = layout::kFormatVersion;
  c[kCodeVersion] = in.code_version;
  k.hash = hash_components(c, false);
  k.model_info = path_safe(c[kModelClass]) + (in.dynamic ? "_dynamic" : "_static") +
                 (in.config.mode == CompileMode::reduce_overhead ? "_aclgraphcache" : "") +
                 (in.ge_cache && in.config.mode == CompileMode::max_autotune ? "_gecache" : "") + "_" +
                 hash_components(c, true);
  return k;
}

GraphId graph_id(const TraceResult& traced, const KeyInputs& in) {
  const std::string canonical = canonical_hash(traced.graph).hex();
  std::string s = canonical + "|" + checksum(signature_text(traced)) + "|" + in.config.hash().hex() + "|" +
                  in.runtime_version + "|" + in.decompositions + "|" +
                  (in.ge_cache && in.config.mode == CompileMode::max_autotune ? "program" : "graph") + "|" +
                  (in.dynamic ? "dynamic" : "static") + "|" + layout::kFormatVersion;
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return {Hash128{h.high64, h.low64}.hex(), canonical};
}

std::vector<std::string> stale_components(const Components& stored, const Components& now, bool fast_path) {
  using namespace component;
  Components checked;
  for (const char* k : {kRuntimeVersion, kFormatVersion}) checked[k] = now.count(k) ? now.at(k) : "";
  if (fast_path)
    for (const char* k : {kCodeVersion, kParameterSignature}) checked[k] = now.count(k) ? now.at(k) : "";
  return differing_components(stored, checked);
}

std::vector<std::string> differing_components(const Components& stored, const Components& now) {
  std::vector<std::string> out;
  for (const auto& [k, v] : now) {
    auto it = stored.find(k);
    const std::string old = it == stored.end() ? "(none)" : it->second;
    if (old != v) out.push_back(k + ": stored '" + old + "', now '" + v + "'");
  }
  return out;
}

}  // namespace npucache::cache
