// A symbol by name, the shorthand of the IR tests.
#pragma once

#include <npucache/ir/symbolic.h>

namespace npucache::testing {

inline SymExpr s(const char* name) { return SymExpr::symbol(name); }

}  // namespace npucache::testing
