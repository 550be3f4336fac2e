// Why a stored program is not the one this trace needs: the first
// difference between the stored trace and this process's, in words a user
// can act on (the graph's first differing node, a guard, an input, an
// output), for the miss report and `npucache explain`.
#pragma once

#include "cache/uses.h"

#include <npucache/trace.h>

#include <string>
#include <vector>

namespace npucache::cache {

// Empty when the traces are equal (then the difference is in the compile
// settings: config, runtime, decompositions).
std::vector<std::string> trace_differences(const TraceResult& stored, const TraceResult& now);

}  // namespace npucache::cache
