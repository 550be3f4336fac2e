// Serialization of compiled results in npucache's bounded encoding
// (wire.h), versioned for evolution. Deterministic: equal values give equal
// bytes. Decoding never trusts a length or count, and a decoded program is
// validated (validate.h) before it is returned, so hostile bytes give an
// Error, never a crash, an unbounded allocation or an out-of-range kernel
// access. The on-disk framing (compression, checksums) is the cache's
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
CompiledGraph deserialize_compiled(std::string_view bytes, bool* with_program = nullptr);

// A compile region compiled on its own, as a region file keeps it
// (format/region_file.h): the body as traced (its canonical hash is
// `key`), the config it was compiled with, and the compiled region with
// its program.
struct RegionArtifact {
  std::string key;  // canonical_hash(body)
  Graph body;       // as traced
  CompilerConfig config;
  CompiledRegion compiled;
};
std::string serialize_region(const RegionArtifact& a);
// Throws Error unless the bytes are a region of this encoding whose body
// hashes to its key, calls no region and has one result, whose optimized
// body verifies, whose program validates, whose decisions name its steps
// and whose decomposed body's hash is one.
RegionArtifact deserialize_region(std::string_view bytes);

}  // namespace npucache::compiler
