// Where compiled graphs come from beyond this process's own compiles: the
// contract between the engine (engine.h) and the cache layer, which
// implements it (src/cache/source.h: the local cache; src/coord: the MPI
// coordinator).
#pragma once

#include <npucache/trace.h>

#include "compiler/compiled_graph.h"

#include <functional>
#include <memory>

namespace npucache::compiler {

// Traces the method with the call's arguments.
using TraceStep = std::function<TraceResult()>;
// Compiles a trace; `example` binds its symbols to the call's sizes. The
// engine's one compile step: every compile of a cached method goes
// through it.
using CompileStep = std::function<std::shared_ptr<CompiledGraph>(TraceResult trace, const SymBindings& example)>;

class EntrySource {
 public:
  virtual ~EntrySource() = default;
  // The first call of the function: the compiled graph to run it with,
  // stored, received from another rank or compiled here through `compile`.
  // Throws to fail the call.
  virtual std::shared_ptr<CompiledGraph> first_call(const FlatArgs& args, const TraceStep& trace,
                                                    const CompileStep& compile) = 0;
  // A later call matched no entry and was traced and compiled again (a
  // recompile); the engine drops the source afterwards and runs uncached.
  virtual void recompiled(const TraceResult& trace) = 0;
};

}  // namespace npucache::compiler
