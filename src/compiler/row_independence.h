// Whether a graph computes a dynamic dim row by row, so that padding that
// dim (enable_shape_handling) and slicing the padding off the outputs gives
// exactly the unpadded results: a proof over the traced graph's structure,
// never a comparison of values (which the data of one call can pass while
// the computation mixes rows: a batch mean over rows that sum to zero).
//
// A symbol is row-independent when every value that depends on it holds it
// as whole "row" axes -- axes of exactly that size where element i depends
// only on row i of the inputs -- and nothing else: no reduction, softmax or
// contraction over such an axis, no reshape that merges it, no slice,
// concat or gather along it, no attribute computed from it, no update in
// place or communication fed by it (padding rows would be written to a
// buffer or sent), and every output that depends on it holds it as row
// axes only. Ops the analysis does not know count as mixing rows.
//
// Not thread-safe by itself: a pure function of its arguments.
#pragma once

#include <npucache/ir/graph.h>

#include <string>

namespace npucache::compiler {

// True when padding `symbol` (an input dim symbol of `g`, as named in its
// input signature) along its dims cannot change the unpadded part of any
// output, nor write padding anywhere.
bool row_independent(const Graph& g, const std::string& symbol);

}  // namespace npucache::compiler
