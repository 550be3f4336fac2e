// The result of compiling one traced graph: everything a later call (or a
// later process, through the cache) needs to run it.
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/nn/decompositions.h>
#include <npucache/trace.h>

#include "compiler/autotune.h"
#include "compiler/program.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace npucache::compiler {

struct PassTiming {
  std::string name;
  double seconds = 0;
  std::string note;  // "45 -> 31 nodes", "3 groups, 12 ops"
};

// A compile region's body compiled alone, once per process and per object:
// its graph after the graph passes, its program (inputs are the call's
// arguments, parameters the calling layer's, in the order of the body's
// placeholders) and its autotune decisions (step indices of `program`).
// Its sizes are named by the body's own symbols; each call binds them.
struct CompiledRegion {
  Graph optimized;
  DeviceProgram program;  // empty when an archived object left it out
  std::vector<AutotuneDecision> autotune;
  // The canonical hash of the body after decomposition (the first graph
  // pass): a region compiled elsewhere is taken only when this compile's
  // decompositions give the same (custom decompositions are keyed by name
  // alone). Kept in region files, not in objects.
  std::string decomposed;
};

struct CompiledGraph {
  TraceResult trace;  // the graph as traced, its signature, outputs, name
  CompilerConfig config;
  bool dynamic = true;
  // After the graph passes, each region call kept as a call (archived when
  // the program is not).
  Graph optimized;
  // What runs: `calling` with every region call replaced by its region's
  // steps (link_program.h). Without regions the two are one program and
  // `calling` is empty.
  DeviceProgram program;
  DeviceProgram calling;                          // the method's own steps and its calls
  std::map<std::string, CompiledRegion> regions;  // by body hash (trace.regions' keys)
  std::vector<PassTiming> timings;
  std::vector<AutotuneDecision> autotune;  // of `calling` (of `program` without regions)
  // Kernel signatures this compile timed, and those it took from the
  // process's tuning table (both 0 when stored decisions were applied).
  int kernels_tuned = 0;
  int kernels_reused = 0;
  // The regions this compile took from CompileHints::compiled_regions (not
  // stored: what one compile did).
  std::vector<std::string> regions_reused;
  std::size_t planned_arena_bytes = 0;  // for the example call
  std::size_t unplanned_bytes = 0;      // sum of the arena buffers
  double compile_seconds = 0;
};

// What an earlier compile of the same trace left to skip work: the graph
// after the graph passes, and the autotune decisions (a stored artifact
// without its program carries both).
struct CompileHints {
  const Graph* optimized = nullptr;
  const std::vector<AutotuneDecision>* autotune = nullptr;
  const std::map<std::string, CompiledRegion>* regions = nullptr;  // their optimized bodies and decisions
  // Regions compiled before, by body hash (a region file of the store: the
  // cache's region library, cache/region_library.h): taken as they are,
  // their graph passes, lowering and tuning skipped. Not with `optimized`.
  const std::map<std::string, CompiledRegion>* compiled_regions = nullptr;
  // Called for each region this compile compiles, as soon as it is
  // compiled (before the method's own steps are lowered), so that others
  // waiting for it need not wait for the whole method. Must not throw.
  std::function<void(const std::string& key, const CompiledRegion& region)> region_compiled;
};

// Runs the pass pipeline of `config.mode` on a trace. `example` binds the
// trace's symbols to the sizes of the call that triggered the compile
// (autotuning and the memory report use them). With `hints`, the graph
// passes and autotuning are skipped: the hinted graph is verified, lowered
// and given the hinted decisions. Throws ConfigError for what the mode
// cannot lower, VerifyError for an ill-typed decomposition or hint.
CompiledGraph compile_graph(TraceResult trace, const CompilerConfig& config, const DecompositionTable& decompositions,
                            const SymBindings& example, bool dynamic, int device, const CompileHints* hints = nullptr);

// The graph passes compile_graph runs on a region's body as traced, under
// `config` and `decompositions`: a CompiledRegion's `optimized` (and in
// *decomposed its `decomposed`), for a region whose program came without
// them (an object holding its program keeps neither: cache/region_copies.h).
Graph region_graph_passes(const Graph& body, const CompilerConfig& config, const DecompositionTable& decompositions,
                          std::string* decomposed);

// A region's program from its optimized body and stored decisions, as
// compile_graph makes it from a stored graph: lowered, scheduled, the
// decisions applied (kept only when `config` tunes). Throws VerifyError
// for an ill-typed body.
CompiledRegion lower_region(Graph optimized, std::vector<AutotuneDecision> autotune, const CompilerConfig& config);

// "decompose 1.2 ms (120 -> 340 nodes)\n..."
std::string format_timings(const std::vector<PassTiming>& timings);

}  // namespace npucache::compiler
