// Cache administration: what the `npucache` cache commands do, as
// functions returning plain structs (the command line only parses
// arguments and prints). Each takes the cache directory and acts only on
// files that carry npucache's format (an index or object envelope, the
// marker files, the format-1 cache.h5 with npucache's attributes): anything
// else in the directory is reported and left byte for byte.
//
// Errors: CacheError when the directory holds no cache or cannot be read or
// written, CacheRefused for an unsafe directory; ConfigError for a bad
// argument (a size that is not one).
#pragma once

#include "cache/bundle.h"
#include "cache/records.h"
#include "cache/stats.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npucache::cache::admin {

struct LsEntry {
  std::string path;
  std::string graph_key;
  std::string mode;
  std::string model_class;       // the full class name (model_info may shorten it)
  std::size_t stored_bytes = 0;  // of its object's file
};
struct Listing {
  std::string dir;
  std::vector<LsEntry> entries;
  std::size_t objects = 0;
  std::vector<std::string> problems;  // damaged indexes, foreign files
};
Listing ls(const std::string& dir);

struct VerifyResult {
  std::size_t entries = 0, objects = 0, indexes = 0, templates = 0;
  std::vector<std::pair<std::string, std::string>> bad;  // what (a file or an entry), what is wrong
  std::vector<std::string> repaired;                     // with repair: what was done
};
// Checks every index, object, entry and capture template: envelopes,
// checksums, every entry's object present, intact, with the entry's
// checksum and decodable with its parameters; every template decodable,
// named by its content, with its fingerprint, and its object present. With
// `repair`: damaged objects and the entries that use them are removed (the
// next run rebuilds them), damaged indexes are rewritten with their
// readable entries, damaged or orphaned templates removed (the next start
// captures again), stale temporaries removed.
VerifyResult verify(const std::string& dir, bool repair);

struct Stats {
  std::size_t entries = 0, objects = 0;
  // stored: the object files' bytes (zstd-compressed artifact, HDF5 view,
  // traced graph); raw: the artifacts uncompressed (each object's raw_size).
  std::size_t stored_bytes = 0, raw_bytes = 0;
  std::size_t orphans = 0, orphan_bytes = 0;      // objects no entry uses (admin::orphans)
  std::size_t templates = 0, template_bytes = 0;  // capture templates
  std::optional<std::size_t> max_size;            // the configured limit
  CacheStats counters;
};
Stats stats(const std::string& dir);
// Zeroes the counters (keeps last-use times, which gc needs).
void zero_stats(const std::string& dir);

struct Explanation {
  // With an entry: the nearest other entry and the components that differ.
  std::string entry, nearest;
  std::vector<std::string> differences;
  // With an entry: the pieces a method split at graph breaks is cached as
  // (its entries "<entry>.piece-<hash>"), and the dims automatic dynamic
  // made dynamic for it ("arg0 dim 0", from profiles.h5).
  std::vector<std::string> pieces;
  std::vector<std::string> dynamic_dims;
  // Without: the recent misses.
  std::vector<MissRecord> misses;
};
// `entry` empty: the recorded misses; else `entry` against its nearest, its
// pieces and its dynamic dims (an entry that is only pieces is explained).
Explanation explain(const std::string& dir, const std::string& entry);

struct Transfer {
  std::size_t entries = 0, objects = 0, bytes = 0, templates = 0;
};
// The Mega-Cache bundle of a whole cache, written to `file` (0600).
Transfer export_bundle(const std::string& dir, const std::string& file);
// Fills `dir` from a bundle: validated entirely first; a bad bundle is a
// CacheError and changes nothing.
Transfer import_bundle(const std::string& file, const std::string& dir);
// The same for bundle bytes (load_cache_artifacts).
Transfer import_bytes(std::string_view bytes, const std::string& dir);
// The same for records (the remote tier's pull): validated entirely, then
// committed (objects published, indexes updated under their locks).
Transfer import_records(Bundle b, const std::string& dir);
// Every entry of a cache and the objects they use (export, remote push);
// CacheError when an index is damaged (verify --repair first).
Bundle read_cache(const std::string& dir);

struct GcResult {
  std::size_t evicted_layouts = 0, evicted_entries = 0, entries = 0;
  std::size_t removed_objects = 0;
  // Of removed_objects: those no entry used before this gc (orphans: left
  // by an evicted index, a crash or a removed index file) and their bytes.
  std::size_t orphaned_objects = 0, orphaned_bytes = 0;
  std::size_t removed_templates = 0;  // of removed objects, or damaged
  std::size_t remaining_bytes = 0, limit = 0;
  std::vector<std::string> left;      // files named like npucache's that are not (untouched)
  std::vector<std::string> problems;  // indexes that could not be read (their entries are not counted)
};
// Evicts whole layouts (every entry of one model_info and world size),
// least recently used first, until the objects the remaining entries use
// fit `limit`; then removes objects no entry uses. A layout holding an
// entry in `keep` (just written) is never evicted, even when it alone is
// over the limit. Files named like npucache's that are not are left (and
// listed); unreadable indexes are skipped (and listed).
GcResult gc(const std::string& dir, std::size_t limit, const std::vector<std::string>& keep = {});

// What a gc removes, each optional; with none set it only collects orphaned
// objects (which every gc does).
struct GcOptions {
  std::optional<std::size_t> max_size;  // evict layouts down to this (above)
  std::optional<double> older_than_s;   // evict entries last used (saved or served) longer ago
  // Evict every entry of these models, each named by its class (as
  // model_info begins, "npucache.models.Decoder", or as the model_class
  // component, "npucache::models::Decoder": every pipeline stage's index)
  // or by one model_info. A name no entry has is a ConfigError listing the
  // models there.
  std::vector<std::string> models;
};
// The selections of `options` together (an entry any of them picks is
// evicted), then the objects no entry uses, as above; `keep` as above.
GcResult gc(const std::string& dir, const GcOptions& options, const std::vector<std::string>& keep = {});

// Objects no index record references (what gc would collect), and their
// file bytes. A report, no lock: a writer between its object and its index
// shows its object here for that moment.
struct Orphans {
  std::vector<std::string> objects;  // graph keys
  std::size_t bytes = 0;
};
Orphans orphans(const std::string& dir);
// "90s", "30m", "12h", "7d", "2w": seconds; ConfigError naming the text for
// anything else.
double parse_age(const std::string& text);
// "64M", "1.5G", "1024", "2KiB": bytes; ConfigError (naming the text) for
// anything else, negative, NaN or too large.
std::size_t parse_size(const std::string& text);
// "12.3 MiB"
std::string format_size(std::size_t bytes);

// The persistent size limit kept in the directory (config.json).
std::optional<std::size_t> max_size(const std::string& dir);
void set_max_size(const std::string& dir, std::optional<std::size_t> limit);
// After a write: evicts (gc) when a limit is configured and exceeded.
void enforce_limit(const std::string& dir, const std::vector<std::string>& written);

struct ClearResult {
  bool had_cache = false;
  std::size_t removed = 0;
  std::vector<std::string> left;  // files that are not npucache's, left as they were
};
// Removes the cache's files. A directory without a cache is reported and
// nothing is created.
ClearResult clear(const std::string& dir);

}  // namespace npucache::cache::admin
