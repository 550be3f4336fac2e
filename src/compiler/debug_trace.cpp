#include "compiler/debug_trace.h"

#include "log/log.h"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

namespace npucache::compiler {
namespace fs = std::filesystem;

std::string print_program(const DeviceProgram& p) {
  std::string s;
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    const auto& st = p.steps[i];
    s +=
        "step " + std::to_string(i) + " stream " + std::to_string(st.stream) + ": " + std::string(op_name(st.op)) + "(";
    for (std::size_t k = 0; k < st.operands.size(); ++k) s += (k ? ", b" : "b") + std::to_string(st.operands[k]);
    s += ") -> b" + std::to_string(st.result);
    for (const char* a : {"tile_m", "tile_n", "tile_k", "block"})
      if (st.attrs.has(a)) s += " " + std::string(a) + "=" + std::to_string(st.attrs.get_int(a));
    s += "\n";
  }
  return s;
}

std::string write_debug_trace(const std::string& dir, const std::string& label, std::size_t n, const CompiledGraph& g) {
  std::string safe = label;
  for (char& c : safe)
    if (c == '/' || c == '\0') c = '_';
  const fs::path folder = fs::path(dir) / safe / ("compile_" + std::to_string(n));
  try {
    fs::create_directories(folder);
    auto write = [&](const char* name, const std::string& text) {
      std::ofstream f(folder / name, std::ios::trunc);
      f << text;
      if (!f) throw std::runtime_error("cannot write " + (folder / name).string());
    };
    std::string sig;
    for (const auto& in : g.trace.signature.inputs) sig += in.path + ": " + type_str(in.type) + "\n";
    for (const auto& gv : g.trace.signature.guards) sig += "guard " + gv.path + " == " + gv.value + "\n";
    for (const auto& sg : g.trace.signature.shape_guards) sig += "shape guard " + sg + "\n";
    write("signature.txt", sig);
    std::string traced = print_graph(g.trace.graph);
    for (const auto& [key, body] : g.trace.regions)
      traced += "\n## region " + key + " (its body)\n" + print_graph(body);
    write("traced_graph.txt", traced);
    write("optimized_graph.txt", print_graph(g.optimized));
    write("program.txt", print_program(g.program));
    write("passes.txt", format_timings(g.timings));
  } catch (const std::exception& e) {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard lock(mu);
    if (warned.insert(dir).second)
      log::warn("trace.enabled: could not write the compile's debug files under {} ({}); compiling goes on", dir,
                e.what());
  }
  return folder.string();
}

}  // namespace npucache::compiler
