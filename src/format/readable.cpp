#include "format/readable.h"

#include "compiler/compiled_graph.h"
#include "compiler/debug_trace.h"
#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/keys.h"
#include "format/names.h"
#include "process/context.h"
#include "process/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

namespace npucache::format {
namespace fs = std::filesystem;

namespace {

// The shape guards are kept as the trace recorded them: in its own symbol
// numbering, one symbol s<k> per dynamic input dimension in the order the
// inputs were traced (s1 == 2 says the second dynamic dimension is 2). The
// signature above them renumbers the symbols left after the guards, so the
// same name means another dimension there. Readable text names each trace
// symbol by its dimension instead ("arg2[0].shape[2] == 2"). The numbering
// is replayed from the signature: a dimension had a symbol when it is still
// symbolic, or (under dynamic=true) when it is 2 or more; the replay is
// used only when every guard agrees with it (s<k> == c on a dimension of
// c, s<a> == s<b> on dimensions of one size), else the guards stay in
// trace numbering with a note saying so.
std::vector<std::string> dimension_names(const InputSignature& sig, bool dynamic_all, std::vector<SymExpr>* finals) {
  std::vector<std::string> names;
  for (const auto& in : sig.inputs)
    for (std::size_t d = 0; d < in.type.shape.size(); ++d) {
      const SymExpr& dim = in.type.shape[d];
      const auto c = dim.try_constant();
      if (!c || (dynamic_all && *c >= 2)) {
        names.push_back(in.path + ".shape[" + std::to_string(d) + "]");
        finals->push_back(dim);
      }
    }
  for (const auto& si : sig.sym_inputs) {
    names.push_back(si.path);
    finals->push_back(si.expr);
  }
  return names;
}

// `guard` with each s<k> replaced by names[k]; false when a symbol has no name.
bool rename_symbols(const std::string& guard, const std::vector<std::string>& names, std::string* out) {
  // Bounded digit runs: a crafted number never reaches std::stoul.
  static const std::regex symbol(R"(\bs([0-9]{1,9})\b)");
  std::string r;
  std::size_t at = 0;
  for (auto it = std::sregex_iterator(guard.begin(), guard.end(), symbol); it != std::sregex_iterator(); ++it) {
    const std::size_t k = std::stoul((*it)[1].str());
    if (k >= names.size()) return false;
    r += guard.substr(at, static_cast<std::size_t>(it->position()) - at) + names[k];
    at = static_cast<std::size_t>(it->position() + it->length());
  }
  *out = r + guard.substr(at);
  return true;
}

std::string shape_guards_text(const InputSignature& sig, bool dynamic_all) {
  if (sig.shape_guards.empty()) return "";
  std::vector<SymExpr> finals;
  const std::vector<std::string> names = dimension_names(sig, dynamic_all, &finals);
  static const std::regex to_constant(R"(^s([0-9]{1,9}) == (-?[0-9]{1,18})$)"),
      to_symbol(R"(^s([0-9]{1,9}) == s([0-9]{1,9})$)");
  std::vector<std::string> lines;
  bool agree = true;
  for (const auto& g : sig.shape_guards) {
    std::smatch m;
    if (std::regex_match(g, m, to_constant)) {
      const std::size_t k = std::stoul(m[1].str());
      agree = agree && k < finals.size() && finals[k].try_constant() == std::stoll(m[2].str());
    } else if (std::regex_match(g, m, to_symbol)) {
      const std::size_t a = std::stoul(m[1].str()), b = std::stoul(m[2].str());
      agree = agree && a < finals.size() && b < finals.size() && finals[a] == finals[b];
    }
    std::string named;
    agree = agree && rename_symbols(g, names, &named);
    if (!agree) break;
    lines.push_back("shape guard " + named + "\n");
  }
  std::string s;
  if (agree) {
    for (const auto& l : lines) s += l;
    return s;
  }
  s = "(shape guards in the trace's own numbering: s<k> is the k-th dynamic input dimension in trace order, not "
      "the s<k> of the signature above)\n";
  for (const auto& g : sig.shape_guards) s += "shape guard " + g + "\n";
  return s;
}

}  // namespace

std::string readable_entry(const EntryRecord& e, const ObjectRecord& o) {
  bool with_program = false;
  auto g = load_object(o, e.parameters, &with_program);
  std::string s = "# " + model_cache_meta(e.meta) + "\n# entry " + e.path + "\n# object " + e.graph_key + "\n";
  s += "\n## key components\n";
  for (const auto& [k, v] : e.meta.components) s += k + " = " + v + "\n";
  s += "\n## input signature\n";
  for (const auto& in : g->trace.signature.inputs) s += in.path + ": " + type_str(in.type) + "\n";
  for (const auto& gv : g->trace.signature.guards) s += "guard " + gv.path + " == " + gv.value + "\n";
  const auto dynamic = e.meta.components.find(component::kDynamic);
  s += shape_guards_text(g->trace.signature, dynamic != e.meta.components.end() && dynamic->second == "true");
  s += "\n## traced graph\n" + print_graph(g->trace.graph);
  for (const auto& [key, body] : g->trace.regions) s += "\n## region " + key + " (its body)\n" + print_graph(body);
  if (!g->optimized.nodes().empty()) s += "\n## optimized graph\n" + print_graph(g->optimized);
  s += "\n## compile passes\n" + compiler::format_timings(g->timings);
  if (with_program) {
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
  if (p.filename().empty()) p = p.parent_path();                   // a trailing slash
  if (p.filename() == names::kModuleDataset) p = p.parent_path();  // the seed's .../<func>/compiled_module
  fs::path rest;
  for (fs::path at = p; !at.empty(); at = at.parent_path()) {
    // `at` is the cache directory when it holds the index of the model
    // named by the next component.
    if (!rest.empty()) {
      const std::string model_info = rest.begin()->string();
      struct stat st;
      const fs::path index = at / names::index_file(model_info);
      if (process::Context::current().env().fstatat(AT_FDCWD, index.c_str(), &st, 0) == 0 && S_ISREG(st.st_mode))
        return {at.string(), rest.string()};
    }
    rest = rest.empty() ? at.filename() : at.filename() / rest;
    if (at == at.parent_path()) break;
  }
  throw CacheError("no npucache cache entry at " + path + ": no parent directory holds the index of its model (" +
                   "<cache_dir>/<model_info>.h5)");
}

}  // namespace npucache::format
