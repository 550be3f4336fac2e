#include "cache/keys.h"

#include <npucache/device.h>
#include <npucache/hash.h>

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <link.h>

namespace npucache::cache {
namespace {

std::string hex64(const std::string& s) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(s.data(), s.size())));
  return buf;
}

std::string hash_components(const Components& c, bool identity_only) {
  std::string s;
  for (const auto& [k, v] : c)
    if (!identity_only || !is_validity_component(k)) s += k + "=" + v + "\n";
  return hex64(s);
}

std::string decomposition_names(const DecompositionTable* t) {
  if (t == nullptr || t->empty()) return "default";
  std::string s;
  for (const auto& [op, d] : *t) s += (s.empty() ? "" : ",") + std::string(op_name(op)) + ":" + d.name;
  return s;
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

bool is_validity_component(const std::string& name) {
  return name == "runtime_version" || name == "format_version" || name == "code_fingerprint";
}

std::string runtime_version(int device) {
  const DeviceProperties& p = Platform::get().device(device).properties();
  return p.name + " runtime " + p.runtime_version;
}

std::string parameter_signature(const nn::Module& m) {
  std::string s;
  for (const auto& [n, t] : m.named_parameters()) s += "p:" + n + ":" + type_str(t.type()) + ";";
  for (const auto& [n, t] : m.named_buffers()) s += "b:" + n + ":" + type_str(t.type()) + ";";
  return hex64(s);
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
  c["model_class"] = in.module->type_name();
  c["parameter_signature"] = parameter_signature(*in.module);
  c["method"] = in.method;
  c["config"] = in.config.hash().hex().substr(0, 16);
  c["mode"] = std::string(compile_mode_name(in.config.mode));
  c["dynamic"] = in.dynamic ? "true" : "false";
  c["ge_cache"] = in.ge_cache ? "true" : "false";
  c["decompositions"] = decomposition_names(in.decompositions);
  c["runtime_version"] = runtime_version(in.device);
  c["format_version"] = kCacheFormatVersion;
  c["code_fingerprint"] = in.code_version.empty() ? code_fingerprint(vtable) : "code_version:" + in.code_version;
  k.hash = hash_components(c, false);
  k.model_info = c["model_class"] + (in.dynamic ? "_dynamic" : "_static") +
                 (in.config.mode == CompileMode::reduce_overhead ? "_aclgraphcache" : "") +
                 (in.ge_cache && in.config.mode == CompileMode::max_autotune ? "_gecache" : "") + "_" +
                 hash_components(c, true);
  return k;
}

std::string graph_key(const Graph& traced, const KeyInputs& in) {
  std::string s = canonical_hash(traced).hex() + "|" + in.config.hash().hex() + "|" + runtime_version(in.device) +
                  "|" + decomposition_names(in.decompositions) + "|" +
                  (in.ge_cache && in.config.mode == CompileMode::max_autotune ? "program" : "graph") + "|" +
                  (in.dynamic ? "dynamic" : "static") + "|" + kCacheFormatVersion;
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Hash128{h.high64, h.low64}.hex();
}

std::string entry_path(const std::string& model_info, const std::string& func, int world_size, int global_rank) {
  if (world_size > 1)
    return model_info + "/world" + std::to_string(world_size) + "global_rank" + std::to_string(global_rank) + "/" + func;
  return model_info + "/" + func;
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
