#include "cache/own_key.h"

#include "format/cache_error.h"

namespace npucache::cache {

void check_own_key(const compiler::CompiledGraph& g, const std::string& graph_key, const KeyInputs& in) {
  // The program is what the artifact's own config compiled: another
  // config's program resealed under this config's key is another
  // computation's, though its trace gives this key with the caller's config.
  if (const std::string made = g.config.hash().hex(), asked = in.config.hash().hex(); made != asked)
    throw CacheError("object " + graph_key + " was compiled with config " + made.substr(0, 16) +
                     ", the key asks for config " + asked.substr(0, 16) + " (a mixed-up or rewritten value)");
  const std::string own = graph_id(g.trace, in).key;
  if (own != graph_key)
    throw CacheError("object " + graph_key + " is another computation's: its own trace gives graph key " + own +
                     " (a mixed-up or rewritten value)");
}

KeyInputs key_inputs_of(const EntryRecord& e, const compiler::CompiledGraph& g) {
  using namespace component;
  const auto get = [&](const char* name) {
    const auto it = e.meta.components.find(name);
    if (it == e.meta.components.end())
      throw CacheError("entry " + e.path + " records no " + name + ": its object's key cannot be checked");
    return it->second;
  };
  KeyInputs in;
  in.config = g.config;
  const std::string config = g.config.hash().hex().substr(0, 16);
  if (get(kConfig) != config)
    throw CacheError("entry " + e.path + " records config " + get(kConfig) + ", its object " + e.graph_key +
                     " was compiled with config " + config);
  in.runtime_version = get(kRuntimeVersion);
  in.decompositions = get(kDecompositions);
  const std::string dynamic = get(kDynamic);
  if (dynamic == "auto")
    in.dynamic.reset();
  else if (dynamic == "true" || dynamic == "false")
    in.dynamic = dynamic == "true";
  else
    throw CacheError("entry " + e.path + " records dynamic '" + dynamic + "' (true, false or auto)");
  return in;
}

}  // namespace npucache::cache
