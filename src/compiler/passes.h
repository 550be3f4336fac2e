// The compiler's passes. Graph passes take a graph and return a new one
// (inputs are never modified); program passes annotate a DeviceProgram.
// Each pass has its own file and unit tests (tests/compiler).
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/ir/graph.h>
#include <npucache/nn/decompositions.h>

#include "compiler/program.h"

#include <map>
#include <string>
#include <vector>

namespace npucache::compiler {

// Rewrites composite ops (and ops with a custom decomposition, which takes
// precedence) into primitives by re-tracing their decompositions; repeats
// until no composite op is left. Throws VerifyError naming the node when a
// decomposition returns a value of another type than the op's.
Graph decompose(const Graph& g, const DecompositionTable& custom = {});

// Folds elementwise ops whose operands are all `full` constants (and
// layout ops of a `full`) into a single `full`.
Graph fold_constants(const Graph& g);

// Merges nodes computing the same op on the same operands with the same
// attributes (side-effecting ops excepted).
Graph eliminate_common_subexpressions(const Graph& g);

// matmul(a, permute(b) swapping the last two dims) becomes
// matmul(a, b, trans_b): the transpose is never materialised (linear
// layers' weights are stored [out, in]).
Graph fold_transposes(const Graph& g);

// Drops nodes that neither reach an output nor have side effects.
// Placeholders are kept: they are the call's signature.
Graph eliminate_dead_code(const Graph& g);

// Groups chains of f32 elementwise ops (optionally ending in a sum/mean/max
// over the last dim) into `fused` nodes that make one pass over memory.
struct FusionStats {
  int groups = 0;
  int fused_ops = 0;
};
Graph fuse(const Graph& g, FusionStats* stats = nullptr);

// Links compile regions: every region_call node of `g` is replaced by the
// nodes of its (compiled) body from `bodies` (by the node's "region"), the
// body's inputs and parameter placeholders bound to the call's operands in
// order, its result to the call's value. The result has no region_call
// and lowers like a graph traced without regions. Throws VerifyError when
// a body is missing or does not fit its call (operand count or types,
// result type, the operands it updates in place). A call's "bind" gives
// its values of the body's symbols in the canonical order of the body as
// traced (canonical_symbols); `symbols` holds that order per region when
// `bodies` are optimized bodies (the passes may drop or reorder symbols),
// null when they are the traced bodies.
struct LinkStats {
  int calls = 0;
  int nodes = 0;  // body nodes stamped in
};
Graph link_regions(const Graph& g, const std::map<std::string, Graph>& bodies, LinkStats* stats = nullptr,
                   const std::map<std::string, std::vector<std::string>>* symbols = nullptr);

// Lowers a primitive graph (no composite ops) into a DeviceProgram: one
// buffer per value, one step per kernel; reshape becomes a view;
// buffer_update and send write through views of their first operand. A
// region_call becomes a call step, ordered as a step writing the operands
// its body updates (link_program.h replaces it by its region's steps).
// `memory_planning` false gives every intermediate its own allocation.
DeviceProgram lower(const Graph& g, bool memory_planning);

// Assigns streams: a chain stays on its stream, independent branches get
// other streams (up to max_streams); communication and rng steps stay on
// stream 0 so every rank issues them in the same order.
void assign_streams(DeviceProgram& p, bool single_stream, int max_streams);

}  // namespace npucache::compiler
