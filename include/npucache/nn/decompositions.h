// Decompositions: rewrite a composite op into other ops.
//
// A decomposition is a function over Tensors, so it runs eagerly (eager
// execution of a composite op) and traces (the compiler's decompose pass
// re-traces it into primitive nodes). Every composite op has a default one;
// users may register their own per op (custom_decompositions), which take
// precedence.
#pragma once

#include <npucache/export.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <npucache/ops.h>

namespace npucache {

using Decomposition = std::function<Tensor(const std::vector<Tensor>& inputs, const Attrs& attrs)>;

struct NamedDecomposition {
  std::string name;  // identifies it in cache keys ("user.add_as_add")
  Decomposition fn;
};
using DecompositionTable = std::map<Op, NamedDecomposition>;

// The default decomposition of a composite op; nullptr for primitives.
NPUCACHE_API const Decomposition* default_decomposition(Op op);

}  // namespace npucache
