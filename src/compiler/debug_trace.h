// Readable text of a compile, and the `trace.enabled` option's writer.
#pragma once

#include "compiler/compiled_graph.h"

#include <string>

namespace npucache::compiler {

// One line per step: "step 3 stream 0: matmul(b1, b2) -> b4 tile_m=32".
std::string print_program(const DeviceProgram& p);

// Writes what compile number `n` of `label` ("Model.decode") produced to
// <dir>/<label>/compile_<n>/: traced_graph.txt, optimized_graph.txt,
// program.txt, passes.txt and signature.txt. Returns the folder. A folder
// that cannot be written is warned about (once per directory) and
// skipped: a debugging aid never fails a compile.
std::string write_debug_trace(const std::string& dir, const std::string& label, std::size_t n, const CompiledGraph& g);

}  // namespace npucache::compiler
