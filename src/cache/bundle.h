// The Mega-Cache bundle (docs/FORMAT.md): a versioned, checksummed,
// zstd-compressed archive of entries and their objects.
//
//   bytes 0-7   magic "NPUCBNDL"
//   bytes 8-11  format version (little-endian u32, currently 2)
//   bytes 12-19 payload length (u64)
//   bytes 20-27 xxh3-64 of the payload (u64)
//   payload     zstd frame of a Boost binary archive of the records
#pragma once

#include "cache/records.h"

#include <string>
#include <string_view>
#include <vector>

namespace npucache::cache {

struct Bundle {
  std::vector<EntryRecord> entries;
  std::vector<ObjectRecord> objects;
};

std::string write_bundle(const Bundle& b);
// Throws CacheError naming what is wrong (magic, version, length, checksum).
Bundle read_bundle(std::string_view bytes);

}  // namespace npucache::cache
