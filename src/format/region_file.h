// A compiled region's file, regions/<region key>.h5 (docs/FORMAT.md,
// "Compiled regions"): one sealed record holding what the region is valid
// for and the region compiled on its own (compiler::RegionArtifact, zstd
// compressed), and an HDF5 view for people: root attributes (region,
// runtime_version, decompositions, dynamic, config, steps, streams,
// decisions) and the string dataset `body`, the body as traced.
//
// The region key names everything the region's program reads: the body
// (its canonical hash, which covers its shapes, dtypes, attributes and
// symbols), the compiler config, the runtime version, the decompositions,
// the dynamic setting and the format version. A method's graph key covers
// its regions' bodies through their hashes, and the same other components,
// so a region file serves exactly the compiles whose method would store
// the same region.
#pragma once

#include "compiler/serialize.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

// What a compiled region is valid for.
struct RegionValidity {
  std::string region;  // the body's canonical hash (trace.regions' key)
  std::string config;  // CompilerConfig::hash().hex()
  std::string runtime_version;
  std::string decompositions;  // decomposition_names()
  std::string dynamic;         // "dynamic", "static" or "auto"
  std::string format_version;
  friend bool operator==(const RegionValidity&, const RegionValidity&) = default;
};

// A file larger than this is not read; a region's encoding larger than
// kMaxRegionBytes once decompressed is refused before it is allocated (a
// layer's program is kilobytes).
inline constexpr std::size_t kMaxRegionFileBytes = std::size_t{256} << 20;
inline constexpr std::size_t kMaxRegionBytes = std::size_t{256} << 20;

// 32 hex digits over every field of `v`: the file's name.
std::string region_key(const RegionValidity& v);

struct RegionRecord {
  RegionValidity validity;
  compiler::RegionArtifact artifact;
};

// The file of a region compiled under `v`; throws Error when the artifact
// is not the region `v` names (another body or config).
std::string encode_region_file(const RegionValidity& v, const compiler::RegionArtifact& a);
// Validates the envelope and the record, decodes and validates the region
// (compiler::deserialize_region) and checks that it is the region its
// validity names: its body's hash and its config's; throws CacheError
// naming `what` and what is wrong.
RegionRecord decode_region_file(std::string_view file, const std::string& what);

}  // namespace npucache::format
