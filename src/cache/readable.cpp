#include "cache/readable.h"

#include "cache/artifact.h"
#include "cache/cache_error.h"
#include "cache/layout.h"
#include "compiler/compiled_graph.h"
#include "compiler/debug_trace.h"

#include <filesystem>

namespace npucache::cache {
namespace fs = std::filesystem;

std::string readable_entry(const EntryRecord& e, const ObjectRecord& o) {
  bool has_program = false;
  auto g = load_object(o, e.parameters, &has_program);
  std::string s = "# " + model_cache_meta(e.meta) + "\n# entry " + e.path + "\n# object " + e.graph_key + "\n";
  s += "\n## key components\n";
  for (const auto& [k, v] : e.meta.components) s += k + " = " + v + "\n";
  s += "\n## input signature\n";
  for (const auto& in : g->trace.signature.inputs) s += in.path + ": " + type_str(in.type) + "\n";
  for (const auto& gv : g->trace.signature.guards) s += "guard " + gv.path + " == " + gv.value + "\n";
  for (const auto& sg : g->trace.signature.shape_guards) s += "shape guard " + sg + "\n";
  s += "\n## traced graph\n" + print_graph(g->trace.graph);
  if (!g->optimized.nodes().empty()) s += "\n## optimized graph\n" + print_graph(g->optimized);
  s += "\n## compile passes\n" + compiler::format_timings(g->timings);
  if (has_program) {
    s += "\n## device program (" + std::to_string(g->program.steps.size()) + " steps, " +
         std::to_string(g->program.num_streams) + " streams)\n";
    s += compiler::print_program(g->program);
  } else {
    s += "\n(no device program stored: ge_cache was off; a warm start recompiles it from the graph)\n";
  }
  return s;
}

std::pair<std::string, std::string> split_cache_path(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();                    // a trailing slash
  if (p.filename() == layout::kModuleDataset) p = p.parent_path();  // the seed's .../<func>/compiled_module
  fs::path rest;
  for (fs::path at = p; !at.empty(); at = at.parent_path()) {
    // `at` is the cache directory when it holds the index of the model
    // named by the next component.
    if (!rest.empty()) {
      const std::string model_info = rest.begin()->string();
      std::error_code ec;
      if (fs::is_regular_file(at / layout::index_file(model_info), ec)) return {at.string(), rest.string()};
    }
    rest = rest.empty() ? at.filename() : at.filename() / rest;
    if (at == at.parent_path()) break;
  }
  throw CacheError("no npucache cache entry at " + path + ": no parent directory holds the index of its model (" +
                   "<cache_dir>/<model_info>.h5)");
}

}  // namespace npucache::cache
