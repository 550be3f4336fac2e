// Cache administration: what the `npucache` cache commands do, as
// functions returning plain structs (the command line only parses
// arguments and prints). Each takes the cache directory.
//
// Errors: CacheError when the directory holds no cache or cannot be read or
// written; ConfigError for a bad argument (a size that is not one).
#pragma once

#include "cache/records.h"
#include "cache/stats.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npucache::cache::admin {

struct LsEntry {
  std::string path;
  std::string graph_key;
  std::string mode;
  std::size_t stored_bytes = 0;
};
struct Listing {
  std::string file;  // the cache file
  std::vector<LsEntry> entries;
  std::size_t objects = 0;
};
Listing ls(const std::string& dir);

struct VerifyResult {
  std::size_t checked = 0;
  std::vector<std::pair<std::string, std::string>> bad;  // entry path, what is wrong
};
// Reads, checksums and decodes every entry's object.
VerifyResult verify(const std::string& dir);

struct Stats {
  std::size_t entries = 0, objects = 0;
  std::size_t stored_bytes = 0, raw_bytes = 0;
  CacheStats counters;
};
Stats stats(const std::string& dir);

struct Explanation {
  // With an entry: the nearest other entry and the components that differ.
  std::string entry, nearest;
  std::vector<std::string> differences;
  // Without: the recent misses.
  std::vector<MissRecord> misses;
};
// `entry` empty: the recorded misses; else `entry` against its nearest.
Explanation explain(const std::string& dir, const std::string& entry);

struct Transfer {
  std::size_t entries = 0, objects = 0, bytes = 0;
};
// The Mega-Cache bundle of a whole cache, written to `file`.
Transfer export_bundle(const std::string& dir, const std::string& file);
// Fills `dir` from the bundle in `file`.
Transfer import_bundle(const std::string& file, const std::string& dir);

struct GcResult {
  std::size_t evicted = 0, entries = 0;
  std::size_t remaining_bytes = 0, limit = 0;
};
// Evicts least recently used entries until the stored objects fit `limit`.
GcResult gc(const std::string& dir, std::size_t limit);
// "64M", "1.5G", "1024": bytes; throws ConfigError for anything else.
std::size_t parse_size(const std::string& text);

// Removes the cache and its statistics.
void clear(const std::string& dir);

}  // namespace npucache::cache::admin
