#include "format/keys.h"

#include <npucache/ir/hash.h>

#include "format/names.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string_view>

namespace npucache::format {
namespace {

bool is_model_component(const std::string& name);

// `model_only`: the components that name model_info (the model's, less
// the config's option text, which the config hash stands for, and the
// format version: each format version has index files of its own).
std::string hash_components(const Components& c, bool model_only) {
  std::string s;
  for (const auto& [k, v] : c)
    if (k == component::kParameterList)
      continue;  // parameter_signature stands for it
    else if (!model_only || (is_model_component(k) && k != component::kConfigOptions) || k == component::kFormatVersion)
      s += names::key_text({k, v});  // a value may hold any byte (format 11.0.0: "k=v\n" before)
  return checksum(s);
}

// A class name as a directory name: "a::b::Model<int>" -> "a.b.Model_int_",
// "(anonymous namespace)::M" -> "anonymous.M". (model_info's hash covers
// the exact name, so names made equal here never share an entry.)
std::string path_safe(const std::string& name) {
  static constexpr std::string_view anonymous = "(anonymous namespace)";
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
  for (const auto& si : t.signature.sym_inputs) s += "symint " + si.path + " " + si.expr.str() + "\n";
  for (const auto& g : t.signature.shape_guards) s += "shape " + g + "\n";
  for (const auto& o : t.output_paths) s += "out " + o + "\n";
  return s;
}

// The class part of model_info: path_safe(name), or for a long name (class
// templates reach hundreds of characters) its first kReadable characters,
// '-' and 8 hex digits of the full name's hash, so model_info, its index
// file and the file's temporaries stay far below the 255-byte name limit.
// The full name is recorded with every entry (component model_class).
std::string readable_class(const std::string& name) {
  constexpr std::size_t kMax = 96, kReadable = 80;
  std::string safe = path_safe(name);
  if (safe.size() <= kMax) return safe;
  return safe.substr(0, kReadable) + "-" + checksum(name).substr(0, 8);
}

}  // namespace

std::string decomposition_names(const DecompositionTable& t) {
  if (t.empty()) return "default";
  std::string s;
  // Each name as its length and itself ("gelu:4:tanh"): a name may hold
  // ',' or ':' (format 11.0.0; unescaped before, so two tables could name
  // alike).
  for (const auto& [op, d] : t)
    s += (s.empty() ? "" : ",") + std::string(op_name(op)) + ":" + std::to_string(d.name.size()) + ":" + d.name;
  return s;
}

const std::vector<std::string>& component_names() {
  using namespace component;
  static const auto& names = *new const std::vector<std::string>{
      // never destroyed (commits at exit)
      kModelClass, kParameterSignature, kConfig,        kMode,        kDynamic,       kGeCache,      kDecompositions,
      kMethod,     kRuntimeVersion,     kFormatVersion, kCodeVersion, kConfigOptions, kParameterList};
  return names;
}

namespace {
// The components hashed into model_info.
bool is_model_component(const std::string& name) {
  using namespace component;
  // ge_cache decides what a save stores (the program or the graph), not
  // what the model is: single-process and distributed caches of a model
  // share its entries, whichever level their objects hold (each entry
  // records its level: with_program).
  return name != kMethod && name != kRuntimeVersion && name != kFormatVersion && name != kCodeVersion &&
         name != kGeCache;
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

std::string parameter_list(const nn::Module& m) {
  std::string s;
  for (const auto& [n, t] : m.named_parameters()) s += "p:" + n + ":" + type_str(t.type()) + ";";
  for (const auto& [n, t] : m.named_buffers()) s += "b:" + n + ":" + type_str(t.type()) + ";";
  return s;
}

std::string parameter_signature(const nn::Module& m) { return checksum(parameter_list(m)); }

std::string first_parameter_difference(const std::string& stored, const std::string& now) {
  if (stored.empty() || now.empty() || stored == now) return "";
  struct Item {
    std::string kind, name, type;
  };
  auto items = [](const std::string& text) {
    std::vector<Item> out;
    std::size_t at = 0;
    while (at < text.size()) {
      std::size_t end = text.find(';', at);
      if (end == std::string::npos) end = text.size();
      const std::string item = text.substr(at, end - at);
      const std::size_t first = item.find(':'), last = item.rfind(':');
      if (first != std::string::npos && last > first)
        out.push_back({item.substr(0, first) == "b" ? "buffer" : "parameter", item.substr(first + 1, last - first - 1),
                       item.substr(last + 1)});
      at = end + 1;
    }
    return out;
  };
  const auto a = items(stored), b = items(now);
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size()) return b[i].kind + " " + b[i].name + ": absent stored, " + b[i].type + " now";
    if (i >= b.size()) return a[i].kind + " " + a[i].name + ": " + a[i].type + " stored, absent now";
    if (a[i].name != b[i].name || a[i].kind != b[i].kind)
      return b[i].kind + " #" + std::to_string(i + 1) + ": stored " + a[i].name + " " + a[i].type + ", now " +
             b[i].name + " " + b[i].type;
    if (a[i].type != b[i].type) return b[i].kind + " " + b[i].name + ": stored " + a[i].type + ", now " + b[i].type;
  }
  return "";
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
  c[kDynamic] = !in.dynamic ? "auto" : *in.dynamic ? "true" : "false";
  c[kGeCache] = in.ge_cache ? "true" : "false";
  c[kDecompositions] = in.decompositions;
  c[kRuntimeVersion] = in.runtime_version;
  c[kFormatVersion] = names::kFormatVersion;
  c[kCodeVersion] = in.code_version;
  std::string options = in.config.dump();
  for (auto& ch : options)
    if (ch == '\n') ch = ';';
  c[kConfigOptions] = options;
  if (std::string list = parameter_list(*in.module); list.size() <= kMaxParameterList) c[kParameterList] = list;
  k.hash = hash_components(c, false);
  k.model_info = readable_class(c[kModelClass]) +
                 (!in.dynamic   ? "_auto"
                  : *in.dynamic ? "_dynamic"
                                : "_static") +
                 (in.config.captures() ? "_aclgraphcache" : "") + "_" + hash_components(c, true);
  return k;
}

GraphId graph_id(const TraceResult& traced, const KeyInputs& in) {
  const std::string canonical = canonical_hash(traced.graph).hex();
  // Not whether the object holds the program: the computation is the same
  // either way, and a lookup lowers a graph-only object.
  const std::string s = names::key_text({canonical, checksum(signature_text(traced)), in.config.hash().hex(),
                                         in.runtime_version, in.decompositions,
                                         !in.dynamic   ? "auto"
                                         : *in.dynamic ? "dynamic"
                                                       : "static",
                                         names::kFormatVersion});
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
    if (k == component::kParameterList) continue;  // a record: first_parameter_difference names it
    auto it = stored.find(k);
    const std::string old = it == stored.end() ? "(none)" : it->second;
    if (old != v) out.push_back(k + ": stored '" + old + "', now '" + v + "'");
  }
  return out;
}

std::vector<std::string> model_differences(const Components& stored, const Components& now) {
  using namespace component;
  std::vector<std::string> out;
  auto list = [](const Components& c) {
    auto it = c.find(kParameterList);
    return it == c.end() ? std::string() : it->second;
  };
  const std::string parameter = first_parameter_difference(list(stored), list(now));
  for (const auto& d : differing_components(model_components(stored), model_components(now)))
    if (d.rfind(kConfig + std::string(":"), 0) != 0 && d.rfind(kConfigOptions + std::string(":"), 0) != 0)
      out.push_back(!parameter.empty() && d.rfind(kParameterSignature + std::string(":"), 0) == 0 ? parameter : d);
  // The config, option by option (its hash alone says nothing).
  auto options = [](const Components& c) {
    std::map<std::string, std::string> m;
    auto it = c.find(kConfigOptions);
    if (it == c.end()) return m;
    std::size_t at = 0;
    while (at < it->second.size()) {
      std::size_t end = it->second.find(';', at);
      if (end == std::string::npos) end = it->second.size();
      const std::string kv = it->second.substr(at, end - at);
      if (auto eq = kv.find('='); eq != std::string::npos) m[kv.substr(0, eq)] = kv.substr(eq + 1);
      at = end + 1;
    }
    return m;
  };
  const auto a = options(stored), b = options(now);
  for (const auto& [k, v] : b)
    if (auto it = a.find(k); it == a.end() || it->second != v)
      out.push_back("config option " + k + ": stored '" + (it == a.end() ? "(none)" : it->second) + "', now '" + v +
                    "'");
  const auto sc = stored.find(kConfig), nc = now.find(kConfig);
  if (out.empty() && sc != stored.end() && nc != now.end() && sc->second != nc->second)
    out.push_back("config: stored '" + sc->second + "', now '" + nc->second + "'");
  return out;
}

}  // namespace npucache::format
