// The engine behind CompiledMethod: the compiled entries of one method with
// their input signatures, the one place compile_graph is called, and the
// optional EntrySource that provides the first entry (the cache).
#pragma once

#include <npucache/compile.h>

#include "compiler/entry_source.h"

#include <memory>

namespace npucache::detail {

// A function whose first entry comes from `source` (null: memory only).
std::shared_ptr<CompiledFunction> make_function(const nn::Module& module, CompileOptions options,
                                                std::shared_ptr<compiler::EntrySource> source);
// The i-th compiled entry (tests and benchmarks inspect it).
const compiler::CompiledGraph& entry(const CompiledFunction& f, std::size_t i);
// Seconds the entry source took to provide the first entry (lookup, read,
// decode, bind on a hit).
double first_call_seconds(const CompiledFunction& f);
// The effective compiler config of the function.
const CompilerConfig& config(const CompiledFunction& f);

}  // namespace npucache::detail
