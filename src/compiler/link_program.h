// Linking a method's program with its compile regions' programs: each
// region is lowered, scheduled and tuned once, and every call of it is
// stamped out of its steps when the method's program is made to run
// (after a compile, and when a stored object is loaded, which stores each
// region once).
//
// A call step of `calling` (Op::region_call) is replaced by its region's
// steps: the region's inputs become the call's arguments, its parameters
// the call's remaining operands (the calling layer's own), its result the
// call's result buffer, its other buffers new buffers of the method; its
// sizes are the call's (`bind`, in the body's canonical symbol order).
// Order is kept: a region step that follows no other region step follows
// what the call followed, and a step that followed the call follows every
// step of it. Streams are the region's own (both were scheduled with one
// config; communication stays on stream 0). Outputs get per-run storage as
// lowering gives it. Without calls, the result is `calling` itself.
//
// Inputs come from outside the process (a cache file, another rank): both
// are validated (validate.h) before linking, the call's fit is checked
// while linking (operand count and types, bind size, result type) and a
// misfit is a VerifyError naming the call; the linked program is validated
// again by its loader: its structure whole, and the types of the steps
// whose types no validation of a part checked (ProgramLinkStats::typed).
// Every buffer a step reads or writes keeps the type it had in its part
// (operands and results of a call are checked equal to the region's), so a
// step copied with its attributes unchanged, or with its symbols renamed
// one to one, types as it did there.
#pragma once

#include "compiler/compiled_graph.h"

#include <map>
#include <string>
#include <vector>

namespace npucache::compiler {

struct ProgramLinkStats {
  int calls = 0;
  int steps = 0;  // region steps stamped in
  // Per linked step: 1 when its op, attributes, operand types and result
  // type are those of a step of `calling` or of its region's program, up
  // to a renaming of symbols (a call that binds the body's symbols to
  // distinct symbols: a layer's own cache length), so a validation of
  // those programs checked its type already (validate_program's `typed`);
  // 0 for a step of a call that binds a size to a constant, an expression
  // or one symbol to two of the body's.
  std::vector<char> typed;
};

// `symbols` gives each region's body symbols in canonical order (what a
// call's `bind` binds: canonical_symbols of the body as traced).
// `memory_planning` is the config's (a region's own buffers become arena
// or temp buffers of the method as lowering would make them).
DeviceProgram link_program(const DeviceProgram& calling, const std::map<std::string, CompiledRegion>& regions,
                           const std::map<std::string, std::vector<std::string>>& symbols, bool memory_planning,
                           ProgramLinkStats* stats = nullptr);

// A region compiled from a body traced with other symbol names (another
// method's trace of the same body: equal canonical hashes, each symbol the
// same in canonical order) named as `body` names them: `from` is the
// canonical_symbols of the body it was compiled from. Its program's buffer
// types and attributes and its optimized body are renamed together.
// Throws VerifyError when the two bodies have different symbol counts.
CompiledRegion renamed_region(CompiledRegion r, const std::vector<std::string>& from, const Graph& body);

}  // namespace npucache::compiler
