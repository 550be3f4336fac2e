// The life of a stored artifact from its record to the program a call
// runs: the one way every path turns stored bytes into a compiled graph --
// a hit, the stored object of a trace that missed its entry, the remote
// tier's object, an object adopted from another writer, the coordinator's
// owners and receivers (decode and prepare), and import and verify (decode
// alone: they have no call).
//
// Errors: decode throws CacheError when the bytes do not decode or name
// other parameters than the entry lists (a damaged or crafted object);
// prepare throws TraceError when the call's inputs do not fit the stored
// signature (another call, not damage) and CacheError when the module
// lacks a parameter the program reads (an entry made for another module).
#pragma once

#include <npucache/trace.h>

#include "cache/uses.h"
#include "compiler/compiled_graph.h"
#include "compiler/entry_source.h"
#include "format/records.h"

#include <memory>
#include <string>
#include <vector>

namespace npucache::cache {

struct Decoded {
  std::shared_ptr<compiler::CompiledGraph> graph;
  bool with_program = false;  // the bytes hold the compiled program (else the optimized graph only)
};

// Decoded with bounded readers, the program validated, the placeholders
// named `parameters` (the entry's: ranks sharing an object may name their
// parameters differently).
Decoded decode(const ObjectRecord& o, const std::vector<std::string>& parameters);
// Decoded with the names it was stored with: whether bytes are usable at
// all (a store adopting another writer's object, verify, import).
Decoded decode(const ObjectRecord& o);

// What a decoded artifact is prepared for: one call of one module's method.
struct CallSite {
  const FlatArgs& args;
  const compiler::CompileStep& compile;  // lowers a stored graph without a program
  const nn::Module& module;
  const std::string& runtime;  // the device's runtime (tuning decisions are per runtime)
};

// Its autotune decisions merged into the process's tuning table (a later
// compile of the same shapes here reuses them), bound to the call's inputs,
// the stored graph lowered with the stored decisions when the bytes hold no
// program, and the module checked against the parameters the program
// reads.
std::shared_ptr<compiler::CompiledGraph> prepare(Decoded d, const CallSite& call);

// decode, then prepare.
std::shared_ptr<compiler::CompiledGraph> runnable(const ObjectRecord& o, const std::vector<std::string>& parameters,
                                                  const CallSite& call);

}  // namespace npucache::cache
