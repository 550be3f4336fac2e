// Where compiled graphs come from beyond this process's own compiles: the
// contract between the engine (engine.h) and the cache layer, which
// implements it (src/cache/source.h: the local cache; src/coord: the MPI
// coordinator).
#pragma once

#include <npucache/compile.h>
#include <npucache/trace.h>

#include "compiler/compiled_graph.h"

#include <functional>
#include <memory>

namespace npucache::compiler {

// Traces the method with the call's arguments.
using TraceStep = std::function<TraceResult()>;
// Compiles a trace; `example` binds its symbols to the call's sizes;
// `hints` (may be null) let a stored graph-only artifact skip the graph
// passes and autotuning. The engine's one compile step: every compile of a
// cached method goes through it.
using CompileStep = std::function<std::shared_ptr<CompiledGraph>(TraceResult trace, const SymBindings& example,
                                                                 const CompileHints* hints)>;

// The compiled graph a first call runs, and how it was obtained.
struct FirstEntry {
  std::shared_ptr<CompiledGraph> graph;
  CallStatus status;  // outcome, cached, reason, entry (the engine counts compiles)
};

class EntrySource {
 public:
  virtual ~EntrySource() = default;
  // The first call of the function: the compiled graph to run it with,
  // stored, received from another rank or compiled here through `compile`.
  // Throws to fail the call.
  virtual FirstEntry first_call(const FlatArgs& args, const TraceStep& trace, const CompileStep& compile) = 0;
  // A later call matched no entry (`why`: the stored entry's signature
  // mismatch) and was traced and compiled again; the engine drops the
  // source afterwards and runs uncached.
  virtual void recompiled(const TraceResult& trace, const std::string& why) = 0;
};

}  // namespace npucache::compiler
