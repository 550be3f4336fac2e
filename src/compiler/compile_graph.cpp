// The pass pipelines of the two modes.
#include <npucache/error.h>
#include <npucache/ir/hash.h>

#include "compiler/compiled_graph.h"
#include "compiler/memory_plan.h"
#include "compiler/passes.h"
#include "log/progress.h"

#include <chrono>
#include <cstdio>
#include <functional>

namespace npucache::compiler {
namespace {

class PassManager {
 public:
  explicit PassManager(std::vector<PassTiming>& out) : out_(out) {}
  Graph run_graph_pass(const std::string& name, const Graph& g, const std::function<Graph(const Graph&)>& pass) {
    log::Progress::note("pass " + name);
    auto t0 = std::chrono::steady_clock::now();
    Graph r = pass(g);
    out_.push_back({name, since(t0), std::to_string(g.size()) + " -> " + std::to_string(r.size()) + " nodes"});
    return r;
  }
  template <class F>
  void run(const std::string& name, F&& f) {
    log::Progress::note("pass " + name);
    auto t0 = std::chrono::steady_clock::now();
    std::string note = f();
    out_.push_back({name, since(t0), std::move(note)});
  }

 private:
  static double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<PassTiming>& out_;
};

}  // namespace

CompiledGraph compile_graph(TraceResult trace, const CompilerConfig& config, const DecompositionTable& decompositions,
                            const SymBindings& example, bool dynamic, int device, const CompileHints* hints) {
  config.validate();
  const log::Progress progress("compiling " + (trace.name.empty() ? std::string("a graph") : trace.name));
  auto t0 = std::chrono::steady_clock::now();
  CompiledGraph cg;
  cg.config = config;
  cg.dynamic = dynamic;
  PassManager pm(cg.timings);
  // What the config asks for (docs/GUIDE.md, "The compile surface"):
  // code generation runs the graph passes and fuses; tuning times tilings;
  // a captured program runs on one stream and may not draw random numbers.
  const bool codegen = config.generates_code(), tune = config.tunes(), capture = config.captures();
  if (const Node* n = capture ? first_rng_node(trace.graph) : nullptr)
    throw ConfigError("node '" + n->name + "' (" + std::string(op_name(n->op)) +
                      ") cannot be lowered in reduce-overhead mode: a captured task graph would "
                      "repeat the same random numbers on every replay; use max-autotune");
  for (const auto& [key, body] : trace.regions)
    if (const Node* n = capture ? first_rng_node(body) : nullptr)
      throw ConfigError("node '" + n->name + "' (" + std::string(op_name(n->op)) + ") of region " + key +
                        " cannot be lowered in reduce-overhead mode: a captured task graph would repeat the same "
                        "random numbers on every replay; use max-autotune");
  // The graph passes, on the method's graph and on each region's body once
  // (a region call is opaque to them: it is kept, never merged).
  auto optimize = [&](const Graph& traced, const std::string& prefix) {
    Graph x =
        pm.run_graph_pass(prefix + "decompose", traced, [&](const Graph& y) { return decompose(y, decompositions); });
    if (codegen && !capture) {
      x = pm.run_graph_pass(prefix + "constant_fold", x, fold_constants);
      x = pm.run_graph_pass(prefix + "cse", x, eliminate_common_subexpressions);
      x = pm.run_graph_pass(prefix + "fold_transposes", x, fold_transposes);
    }
    x = pm.run_graph_pass(prefix + "dce", x, eliminate_dead_code);
    if (codegen && config.fusion) {
      FusionStats st;
      x = pm.run_graph_pass(prefix + "fusion", x, [&](const Graph& y) { return fuse(y, &st); });
      cg.timings.back().note +=
          ", " + std::to_string(st.groups) + " fused kernels of " + std::to_string(st.fused_ops) + " ops";
    }
    return x;
  };
  Graph g;
  if (hints && hints->optimized) {
    pm.run("graph passes", [&] {
      g = *hints->optimized;
      return "skipped: stored graph of " + std::to_string(g.size()) + " nodes";
    });
  } else {
    g = optimize(trace.graph, "");
    if (!trace.regions.empty()) {
      std::map<std::string, Graph> bodies;
      std::map<std::string, std::vector<std::string>> symbols;
      for (const auto& [key, body] : trace.regions) {
        bodies.emplace(key, optimize(body, "region " + key.substr(0, 8) + " "));
        symbols.emplace(key, canonical_symbols(body));
      }
      pm.run("link_regions", [&] {
        LinkStats st;
        g = eliminate_dead_code(link_regions(g, bodies, &st, &symbols));
        return std::to_string(st.calls) + " calls of " + std::to_string(bodies.size()) + " regions, " +
               std::to_string(st.nodes) + " nodes stamped in";
      });
    }
  }
  verify(g);
  pm.run("lower", [&] {
    cg.program = lower(g, config.memory_planning);
    return std::to_string(cg.program.steps.size()) + " steps";
  });
  pm.run("stream_assign", [&] {
    assign_streams(cg.program, capture || config.ge_config.enable_single_stream, config.max_streams);
    return std::to_string(cg.program.num_streams) + " streams";
  });
  if (tune && hints && hints->autotune)
    pm.run("autotune", [&] {
      cg.autotune = *hints->autotune;
      apply_autotune(cg.program, cg.autotune);
      return std::to_string(cg.autotune.size()) + " stored decisions applied";
    });
  else if (tune)
    pm.run("autotune", [&] {
      cg.autotune = autotune(cg.program, example, config, device);
      std::size_t sliced = 0, untimed = 0;
      for (const auto& d : cg.autotune) {
        ++(d.from_table ? cg.kernels_reused : cg.kernels_tuned);
        if (d.timed_on.empty() || d.from_table) continue;
        ++(d.candidates > 0 ? sliced : untimed);
      }
      std::string note = std::to_string(cg.kernels_tuned) + " kernels tuned";
      if (sliced) note += ", " + std::to_string(sliced) + " on a slice within the scratch bound";
      if (untimed) note += ", " + std::to_string(untimed) + " above it not timed";
      if (cg.kernels_reused) note += ", " + std::to_string(cg.kernels_reused) + " reused from the tuning table";
      return note;
    });
  pm.run("memory_plan", [&] {
    HappensBefore hb(cg.program);
    std::vector<std::size_t> bytes;
    for (const auto& b : cg.program.buffers)
      bytes.push_back(static_cast<std::size_t>(numel(b.type.shape).evaluate(example)) * dtype_size(b.type.dtype));
    MemoryPlan plan = plan_memory(cg.program, hb, bytes);
    cg.planned_arena_bytes = plan.arena_bytes;
    cg.unplanned_bytes = plan.sum_bytes;
    return std::to_string(plan.arena_bytes) + " of " + std::to_string(plan.sum_bytes) + " bytes";
  });
  cg.optimized = std::move(g);
  cg.trace = std::move(trace);
  cg.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cg;
}

std::string format_timings(const std::vector<PassTiming>& timings) {
  std::string s;
  char buf[256];
  for (const auto& t : timings) {
    std::snprintf(buf, sizeof buf, "%-14s %9.3f ms  %s\n", t.name.c_str(), t.seconds * 1e3, t.note.c_str());
    s += buf;
  }
  return s;
}

}  // namespace npucache::compiler
