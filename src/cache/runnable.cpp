#include "cache/runnable.h"

#include <npucache/error.h>

#include "compiler/serialize.h"
#include "compiler/tuning_table.h"
#include "format/artifact.h"

namespace npucache::cache {

Decoded decode(const ObjectRecord& o, const std::vector<std::string>& parameters) {
  Decoded d;
  d.graph = load_object(o, parameters, &d.with_program);
  return d;
}

Decoded decode(const ObjectRecord& o) {
  Decoded d;
  d.graph = std::make_shared<compiler::CompiledGraph>();
  try {
    *d.graph = compiler::deserialize_compiled(o.raw, &d.with_program);
  } catch (const Error& e) {
    throw CacheError("object " + o.graph_key + " cannot be decoded: " + e.what());
  }
  return d;
}

std::shared_ptr<compiler::CompiledGraph> prepare(Decoded d, const CallSite& call) {
  std::shared_ptr<compiler::CompiledGraph> g = std::move(d.graph);
  compiler::merge_decisions(g->autotune, call.runtime);
  for (const auto& [key, region] : g->regions) compiler::merge_decisions(region.autotune, call.runtime);
  const SymBindings b = g->trace.signature.bind(call.args);
  if (!d.with_program) {
    compiler::CompileHints hints;
    hints.optimized = &g->optimized;
    hints.autotune = &g->autotune;
    hints.regions = &g->regions;
    g = call.compile(std::move(g->trace), b, &hints);
  }
  check_binds(*g, call.module);
  return g;
}

std::shared_ptr<compiler::CompiledGraph> runnable(const ObjectRecord& o, const std::vector<std::string>& parameters,
                                                  const CallSite& call) {
  return prepare(decode(o, parameters), call);
}

}  // namespace npucache::cache
