// Serialization of compiled results with Boost.Serialization (binary
// archives, class versions for evolution). Deterministic: equal values give
// equal bytes. The on-disk framing (compression, checksums) is the cache's
// (docs/FORMAT.md).
#pragma once

#include "compiler/compiled_graph.h"

#include <string>
#include <string_view>

namespace npucache::compiler {

std::string serialize_program(const DeviceProgram& p);
DeviceProgram deserialize_program(std::string_view bytes);

// The whole compiled graph; without `with_program` the DeviceProgram is
// left out (a loader then recompiles it from the stored graph).
std::string serialize_compiled(const CompiledGraph& g, bool with_program);
// Throws Error when the bytes are not a valid archive.
CompiledGraph deserialize_compiled(std::string_view bytes, bool* has_program = nullptr);

}  // namespace npucache::compiler
