// The result of compiling one traced graph: everything a later call (or a
// later process, through the cache) needs to run it.
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/nn/decompositions.h>
#include <npucache/trace.h>

#include "compiler/autotune.h"
#include "compiler/program.h"

#include <string>
#include <vector>

namespace npucache::compiler {

struct PassTiming {
  std::string name;
  double seconds = 0;
  std::string note;  // "45 -> 31 nodes", "3 groups, 12 ops"
};

struct CompiledGraph {
  TraceResult trace;  // the graph as traced, its signature, outputs, name
  CompilerConfig config;
  bool dynamic = true;
  Graph optimized;  // after the graph passes (archived when the program is not)
  DeviceProgram program;
  std::vector<PassTiming> timings;
  std::vector<AutotuneDecision> autotune;
  // Kernel signatures this compile timed, and those it took from the
  // process's tuning table (both 0 when stored decisions were applied).
  int kernels_tuned = 0;
  int kernels_reused = 0;
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
};

// Runs the pass pipeline of `config.mode` on a trace. `example` binds the
// trace's symbols to the sizes of the call that triggered the compile
// (autotuning and the memory report use them). With `hints`, the graph
// passes and autotuning are skipped: the hinted graph is verified, lowered
// and given the hinted decisions. Throws ConfigError for what the mode
// cannot lower, VerifyError for an ill-typed decomposition or hint.
CompiledGraph compile_graph(TraceResult trace, const CompilerConfig& config, const DecompositionTable& decompositions,
                            const SymBindings& example, bool dynamic, int device, const CompileHints* hints = nullptr);

// "decompose 1.2 ms (120 -> 340 nodes)\n..."
std::string format_timings(const std::vector<PassTiming>& timings);

}  // namespace npucache::compiler
