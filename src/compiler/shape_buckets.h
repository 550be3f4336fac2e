// enable_shape_handling (compile option): a reduce-overhead call whose
// dynamic sizes are smaller than those of an existing capture is padded up
// to that capture (a bucket) and replayed, and the padding is sliced off
// the outputs -- one capture serves a range of sizes, as npugraph_ex and
// vLLM pad batch sizes.
//
// A symbol can be padded when every input and output dim it appears in is
// exactly that symbol (so padding and slicing are along whole dims), no
// input it sizes is updated in place (a padded copy would take the update),
// and the traced graph computes it row by row (row_independence.h: proven
// from the graph's structure, so no call's data can make a computation that
// mixes rows look paddable, and no padding row is written into a buffer).
// The engine still compares each (bucket, size) pair once with an unpadded
// run before trusting it, and stops padding a method whose results differ
// (with a warning).
//
// Not thread-safe by itself: pure functions over the program and tensors.
#pragma once

#include <npucache/tensor.h>

#include "compiler/program.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace npucache::compiler {

// The symbols of `p` (compiled from `traced`) that can be padded.
std::set<std::string> paddable_symbols(const DeviceProgram& p, const Graph& traced);

// The captured binding nearest above `actual`: equal in every symbol but
// paddable ones, where it is >= actual (the least padding in all). nullopt
// when there is none or `actual` itself is captured.
std::optional<SymBindings> nearest_bucket(const SymBindings& actual, const std::vector<SymBindings>& captured,
                                          const std::set<std::string>& paddable);

// `inputs` padded with zeros along every dim of the program's input types
// that is a symbol whose bucket value exceeds its actual value.
std::vector<Tensor> pad_inputs(const DeviceProgram& p, const std::vector<Tensor>& inputs, const SymBindings& actual,
                               const SymBindings& bucket);
// `outputs` (of the bucket's replay) sliced back to the actual sizes.
std::vector<Tensor> slice_outputs(const DeviceProgram& p, const std::vector<Tensor>& outputs, const SymBindings& actual,
                                  const SymBindings& bucket);

}  // namespace npucache::compiler
