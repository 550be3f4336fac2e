#include "cache/keys.h"

#include <npucache/ir/hash.h>

#include "cache/layout.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <link.h>

namespace npucache::cache {
namespace {

std::string hash_components(const Components& c, bool identity_only) {
  std::string s;
  for (const auto& [k, v] : c)
    if (!identity_only || !is_validity_component(k)) s += k + "=" + v + "\n";
  return checksum(s);
}

struct Search {
  const void* address;
  std::string found;
};

int scan_object(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  const auto addr = reinterpret_cast<ElfW(Addr)>(s->address);
  bool inside = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && addr >= info->dlpi_addr + ph.p_vaddr &&
        addr < info->dlpi_addr + ph.p_vaddr + ph.p_memsz)
      inside = true;
  }
  if (!inside) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        std::string hex;
        char b[3];
        for (unsigned k = 0; k < n->n_descsz; ++k) {
          std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(desc[k]));
          hex += b;
        }
        s->found = "build-id:" + hex;
        return 1;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  s->found = "unknown";
  return 1;
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
  static const std::vector<std::string> names = {kModelClass, kParameterSignature, kMethod, kConfig,
                                                 kMode, kDynamic, kGeCache, kDecompositions,
                                                 kRuntimeVersion, kFormatVersion, kCodeFingerprint};
  return names;
}

bool is_validity_component(const std::string& name) {
  return name == component::kRuntimeVersion || name == component::kFormatVersion ||
         name == component::kCodeFingerprint;
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

std::string code_fingerprint(const void* address) {
  Search s{address, "unknown"};
  dl_iterate_phdr(scan_object, &s);
  return s.found;
}

LookupKey lookup_key(const KeyInputs& in) {
  LookupKey k;
  Components& c = k.components;
  // The object's vtable lives in the binary or library that defines the
  // model class: its build-id identifies the model's code.
  const void* vtable = *reinterpret_cast<const void* const*>(in.module);
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
  c[kCodeFingerprint] = in.code_version.empty() ? code_fingerprint(vtable) : "code_version:" + in.code_version;
  k.hash = hash_components(c, false);
  k.model_info = c[kModelClass] + (in.dynamic ? "_dynamic" : "_static") +
                 (in.config.mode == CompileMode::reduce_overhead ? "_aclgraphcache" : "") +
                 (in.ge_cache && in.config.mode == CompileMode::max_autotune ? "_gecache" : "") + "_" +
                 hash_components(c, true);
  return k;
}

GraphId graph_id(const Graph& traced, const KeyInputs& in) {
  const std::string canonical = canonical_hash(traced).hex();
  std::string s = canonical + "|" + in.config.hash().hex() + "|" + in.runtime_version +
                  "|" + in.decompositions + "|" +
                  (in.ge_cache && in.config.mode == CompileMode::max_autotune ? "program" : "graph") + "|" +
                  (in.dynamic ? "dynamic" : "static") + "|" + layout::kFormatVersion;
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return {Hash128{h.high64, h.low64}.hex(), canonical};
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
