// The pass pipelines of the two modes.
#include <npucache/error.h>
#include <npucache/ir/hash.h>

#include "compiler/compiled_graph.h"
#include "compiler/link_program.h"
#include "compiler/memory_plan.h"
#include "compiler/passes.h"
#include "compiler/validate.h"
#include "log/log.h"
#include "log/progress.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <set>

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
  std::string& last_note() { return out_.back().note; }
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

// The sizes a region is tuned at: its first call's, in the body's own
// symbols (`order`, canonical_symbols of the body as traced).
SymBindings region_example(const Graph& g, const std::string& key, const std::vector<std::string>& order,
                           const SymBindings& example) {
  SymBindings sizes;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::region_call || n.attrs.get<std::string>("region") != key) continue;
    const auto& bind = n.attrs.get<std::vector<SymExpr>>("bind");
    for (std::size_t k = 0; k < order.size() && k < bind.size(); ++k) sizes[order[k]] = bind[k].evaluate(example);
    break;
  }
  return sizes;
}

// The graph passes of `config` on `traced`, timed in `pm` under `prefix`.
// `decomposed`, when given, receives the canonical hash of the graph after
// decomposition (what a region file records: CompiledRegion::decomposed).
Graph graph_passes(PassManager& pm, const Graph& traced, const std::string& prefix, const CompilerConfig& config,
                   const DecompositionTable& decompositions, std::string* decomposed) {
  const bool codegen = config.generates_code(), capture = config.captures();
  Graph x =
      pm.run_graph_pass(prefix + "decompose", traced, [&](const Graph& y) { return decompose(y, decompositions); });
  if (decomposed) *decomposed = canonical_hash(x).hex();
  if (codegen && !capture) {
    x = pm.run_graph_pass(prefix + "constant_fold", x, fold_constants);
    x = pm.run_graph_pass(prefix + "cse", x, eliminate_common_subexpressions);
    x = pm.run_graph_pass(prefix + "fold_transposes", x, fold_transposes);
  }
  x = pm.run_graph_pass(prefix + "dce", x, eliminate_dead_code);
  if (codegen && config.fusion) {
    FusionStats st;
    x = pm.run_graph_pass(prefix + "fusion", x, [&](const Graph& y) { return fuse(y, &st); });
    pm.last_note() += ", " + std::to_string(st.groups) + " fused kernels of " + std::to_string(st.fused_ops) + " ops";
  }
  return x;
}

}  // namespace

Graph region_graph_passes(const Graph& body, const CompilerConfig& config, const DecompositionTable& decompositions,
                          std::string* decomposed) {
  std::vector<PassTiming> timings;
  PassManager pm(timings);
  return graph_passes(pm, body, "", config, decompositions, decomposed);
}

CompiledRegion lower_region(Graph optimized, std::vector<AutotuneDecision> autotune, const CompilerConfig& config) {
  verify(optimized);
  CompiledRegion r;
  r.program = lower(optimized, config.memory_planning);
  assign_streams(r.program, config.captures() || config.ge_config.enable_single_stream, config.max_streams);
  if (config.tunes()) {
    apply_autotune(r.program, autotune);
    r.autotune = std::move(autotune);
  }
  r.optimized = std::move(optimized);
  return r;
}

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
  const bool tune = config.tunes(), capture = config.captures();
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
  // `decomposed`, when given, receives the canonical hash of the body after
  // decomposition (what a region file records: CompiledRegion::decomposed).
  auto optimize = [&](const Graph& traced, const std::string& prefix, std::string* decomposed = nullptr) {
    return graph_passes(pm, traced, prefix, config, decompositions, decomposed);
  };
  // A region compiled before is taken as it is (never with a stored graph,
  // whose regions come with it), and only when this compile's
  // decompositions decompose the body as the one it came from did (a
  // custom decomposition is keyed by its name).
  const auto* compiled = hints && !hints->optimized ? hints->compiled_regions : nullptr;
  std::set<std::string> usable;
  if (compiled)
    for (const auto& [key, body] : trace.regions) {
      const auto it = compiled->find(key);
      if (it == compiled->end()) continue;
      if (canonical_hash(decompose(body, decompositions)).hex() == it->second.decomposed)
        usable.insert(key);
      else
        log::warn(
            "compiled region {} was decomposed otherwise (custom decompositions of the same name differ); "
            "compiling it here",
            key);
    }
  const auto is_reused = [&](const std::string& key) { return usable.count(key) > 0; };
  // The graph passes, or the stored graphs of an earlier compile.
  Graph g;
  std::map<std::string, Graph> bodies;
  std::map<std::string, std::string> decomposed;  // of the bodies compiled here, for region_compiled
  if (hints && hints->optimized) {
    pm.run("graph passes", [&] {
      g = *hints->optimized;
      for (const auto& [key, body] : trace.regions) {
        if (!hints->regions || !hints->regions->count(key))
          throw VerifyError("the stored graph of region " + key + " is missing");
        bodies.emplace(key, hints->regions->at(key).optimized);
      }
      return "skipped: stored graph of " + std::to_string(g.size()) + " nodes";
    });
  } else {
    g = optimize(trace.graph, "");
    for (const auto& [key, body] : trace.regions)
      if (!is_reused(key))
        bodies.emplace(key, optimize(body, "region " + key.substr(0, 8) + " ",
                                     hints && hints->region_compiled ? &decomposed[key] : nullptr));
  }
  verify(g);
  // Lowering, streams and tuning: each region's body once, then the
  // method's own steps with each call a step, then the two linked.
  auto tune_program = [&](DeviceProgram& p, const std::vector<AutotuneDecision>* stored, const SymBindings& sizes) {
    if (!tune) return std::vector<AutotuneDecision>{};
    if (stored) {
      apply_autotune(p, *stored);
      return *stored;
    }
    std::vector<AutotuneDecision> decisions = autotune(p, sizes, config, device);
    for (const auto& d : decisions) ++(d.from_table ? cg.kernels_reused : cg.kernels_tuned);
    return decisions;
  };
  auto schedule = [&](DeviceProgram& p) {
    assign_streams(p, capture || config.ge_config.enable_single_stream, config.max_streams);
  };
  std::map<std::string, std::vector<std::string>> symbols;
  for (const auto& [key, body] : trace.regions) {
    if (!is_reused(key)) continue;
    pm.run("region " + key.substr(0, 8) + " reused", [&] {
      const CompiledRegion& r = compiled->at(key);
      cg.regions.emplace(key, r);
      return std::to_string(r.program.steps.size()) + " steps compiled before";
    });
    symbols.emplace(key, canonical_symbols(body));
    cg.regions_reused.push_back(key);
  }
  for (auto& [key, body] : bodies) {
    verify(body);
    const std::string name = "region " + key.substr(0, 8) + " ";
    const std::vector<std::string> order = canonical_symbols(trace.regions.at(key));
    CompiledRegion r;
    pm.run(name + "lower", [&] {
      r.program = lower(body, config.memory_planning);
      schedule(r.program);
      return std::to_string(r.program.steps.size()) + " steps, " + std::to_string(r.program.num_streams) + " streams";
    });
    if (tune)
      pm.run(name + "autotune", [&] {
        const std::vector<AutotuneDecision>* stored =
            hints && hints->autotune && hints->regions ? &hints->regions->at(key).autotune : nullptr;
        const int tuned = cg.kernels_tuned, reused = cg.kernels_reused;
        r.autotune = tune_program(r.program, stored, region_example(g, key, order, example));
        if (stored) return std::to_string(r.autotune.size()) + " stored decisions applied";
        return std::to_string(cg.kernels_tuned - tuned) + " kernels tuned, " +
               std::to_string(cg.kernels_reused - reused) + " reused from the tuning table";
      });
    r.optimized = std::move(body);
    if (hints && hints->region_compiled && decomposed.count(key)) {  // not from stored graphs
      r.decomposed = decomposed.at(key);
      hints->region_compiled(key, r);
    }
    cg.regions.emplace(key, std::move(r));
    symbols.emplace(key, order);
  }
  DeviceProgram calling;
  pm.run("lower", [&] {
    calling = lower(g, config.memory_planning);
    return std::to_string(calling.steps.size()) + " steps";
  });
  pm.run("stream_assign", [&] {
    schedule(calling);
    return std::to_string(calling.num_streams) + " streams";
  });
  if (tune)
    pm.run("autotune", [&] {
      const bool stored = hints && hints->autotune;
      const int tuned = cg.kernels_tuned, reused = cg.kernels_reused;
      cg.autotune = tune_program(calling, stored ? hints->autotune : nullptr, example);
      if (stored) return std::to_string(cg.autotune.size()) + " stored decisions applied";
      std::size_t sliced = 0, untimed = 0;
      for (const auto& d : cg.autotune) {
        if (d.timed_on.empty() || d.from_table) continue;
        ++(d.candidates > 0 ? sliced : untimed);
      }
      std::string note = std::to_string(cg.kernels_tuned - tuned) + " kernels tuned";
      if (sliced) note += ", " + std::to_string(sliced) + " on a slice within the scratch bound";
      if (untimed) note += ", " + std::to_string(untimed) + " above it not timed";
      if (cg.kernels_reused > reused)
        note += ", " + std::to_string(cg.kernels_reused - reused) + " reused from the tuning table";
      return note;
    });
  if (cg.regions.empty()) {
    cg.program = std::move(calling);
  } else {
    pm.run("link_program", [&] {
      ProgramLinkStats st;
      cg.program = link_program(calling, cg.regions, symbols, config.memory_planning, &st);
      // A stored region's program was checked alone when it was read;
      // stamped into this method's program, the whole is checked before
      // it can run (a VerifyError: the caller compiles the regions again).
      if (!cg.regions_reused.empty()) validate_program(cg.program, false, &st.typed);
      cg.calling = std::move(calling);
      return std::to_string(st.calls) + " calls of " + std::to_string(cg.regions.size()) + " regions, " +
             std::to_string(st.steps) + " steps stamped in";
    });
  }
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
