// Where compiled graphs come from beyond this process's own compiles: the
// contract between the engine (engine.h) and the cache layer, which
// implements it (src/cache/source.h: the local cache; src/coord: the MPI
// coordinator).
#pragma once

#include <npucache/compile.h>
#include <npucache/trace.h>

#include "compiler/capture_template.h"
#include "compiler/compiled_graph.h"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

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
  // Where this graph's capture templates are kept (reduce-overhead with a
  // cache), or null.
  std::shared_ptr<TemplateStore> templates;
};

class EntrySource {
 public:
  virtual ~EntrySource() = default;
  // The first call of the function: the compiled graph to run it with,
  // stored, received from another rank or compiled here through `compile`.
  // Throws to fail the call.
  virtual FirstEntry first_call(const FlatArgs& args, const TraceStep& trace, const CompileStep& compile) = 0;
  // The end of a first call that first_call() served: the engine made the
  // graph runnable (its bind plan and parameters resolved: `bind_s`) and,
  // unless the call only prepared it, ran it (`run_s`, `ran`). `ready_s` is
  // the first call from the start of first_call() to runnable. Called once,
  // by the thread that made the first call, after it ran (or failed to run:
  // then `ran` is false); never throws.
  struct FirstCallEnd {
    double bind_s = 0, ready_s = 0, run_s = 0;
    bool ran = false;
  };
  virtual void first_call_end(const FirstCallEnd& end) noexcept { (void)end; }
  // A later call matched no entry (`why`: the stored entry's signature
  // mismatch) and was traced and compiled again; the engine drops the
  // source afterwards and runs uncached.
  virtual void recompiled(const TraceResult& trace, const std::string& why) = 0;

  // Automatic dynamic (dynamic unset), before the first trace: merges into
  // `dims` the dims that earlier processes (and, under MPI, the other ranks)
  // made dynamic for this method -- seed 004's PGO cache. Throws to fail the
  // call; a profile that cannot be read is warned about and ignored.
  virtual void load_profile(const FlatArgs& args, std::vector<DimMark>& dims) {
    (void)args;
    (void)dims;
  }
  // Automatic dynamic: a later call changed the size of the dims `dims`
  // (the whole profile, the new dims included) and the method is traced
  // again with them dynamic. The source obtains the new graph (stored, or
  // compiled through `compile`), keeps it as the method's entry in place of
  // the old one and keeps the profile. nullopt: the source keeps nothing
  // (the engine compiles and runs the new graph uncached).
  virtual std::optional<FirstEntry> recompile_dynamic(const FlatArgs& args, const TraceStep& trace,
                                                      const CompileStep& compile, const std::vector<DimMark>& dims) {
    (void)args;
    (void)trace;
    (void)compile;
    (void)dims;
    return std::nullopt;
  }
  // Keeps dims made dynamic beside the method's profile (merged with what
  // is there), as recompile_dynamic does; the pieces of a method split at
  // graph breaks keep theirs so (input "piece#<i>:<site>"). A profile that
  // cannot be written is warned about and kept in this process only.
  virtual void save_profile(const std::vector<DimMark>& dims) { (void)dims; }
  // Graph breaks (fullgraph=false): the source of one piece of the method,
  // named `piece_method` ("decode.piece-<hash>"), whose first_call gives
  // the piece's compiled graph (stored or compiled). Null: pieces are not
  // kept (compiled in memory only).
  virtual std::shared_ptr<EntrySource> piece_source(const std::string& piece_method) {
    (void)piece_method;
    return nullptr;
  }
};

}  // namespace npucache::compiler
