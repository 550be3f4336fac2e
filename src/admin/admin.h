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

#include "cache/uses.h"
#include "format/bundle.h"
#include "format/records.h"
#include "storage/gc.h"
#include "storage/stats.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace npucache::cache::admin {

struct LsEntry {
  std::string path;
  std::string graph_key;
  std::string mode;
  std::string model_class;          // the full class name (model_info may shorten it)
  std::size_t stored_bytes = 0;     // of its object's file
  std::optional<double> last_used;  // saved or served, seconds since the epoch (storage/gc.h entry_time)
};
struct Listing {
  std::string dir;
  std::vector<LsEntry> entries;
  std::size_t objects = 0;
  std::vector<std::string> problems;  // damaged indexes, foreign files
};
// Every entry, or those of `models` (each as gc's --model; one no entry
// matches is a ConfigError listing the models).
Listing ls(const std::string& dir, const std::vector<std::string>& models = {});

struct VerifyResult {
  std::size_t entries = 0, objects = 0, indexes = 0, templates = 0, regions = 0;
  std::vector<std::pair<std::string, std::string>> bad;  // what (a file or an entry), what is wrong
  std::vector<std::string> repaired;                     // with repair: what was done
  // Files of another cache format (format/cache_error.h, OtherFormat):
  // another build's beside this one; not damage, never repaired.
  std::vector<std::pair<std::string, std::string>> other_format;
  // Entries and compiled regions an earlier cache format saved (its
  // program's encoding is not this build's): stale, not damage. A job of
  // this build rebuilds them at their next use, a job of that build may
  // still use them (a rolling upgrade), so nothing removes them as damage.
  std::vector<std::pair<std::string, std::string>> stale;
};
// Checks every index, object, entry and capture template: envelopes,
// checksums, every entry's object present, intact, with the entry's
// checksum and decodable with its parameters; every template decodable,
// named by its content, with its fingerprint, and its object present;
// every compiled region decodable and named by its content. With
// `repair`: damaged objects and the entries that use them are removed (the
// next run rebuilds them), damaged indexes are rewritten with their
// readable entries, damaged or orphaned templates removed (the next start
// captures again), stale temporaries removed. A file of another cache
// format (a newer build's on a shared directory) is listed in
// `other_format` and left as it is.
//
// Beside running jobs (docs/FORMAT.md, "Lock protocol"): the check holds the
// store lock shared (writers go on; a busy, healthy cache is reported
// healthy); the repair then takes it exclusively within `wait_s` (else
// CacheBusy, nothing changed) and checks every finding again before it
// removes or rewrites anything, so nothing a job saved meanwhile is lost.
VerifyResult verify(const std::string& dir, bool repair, double wait_s = kAdminWaitSeconds);

struct Stats {
  std::size_t entries = 0, objects = 0;
  // stored: the object files' bytes (zstd-compressed artifact, HDF5 view,
  // traced graph); raw: the artifacts uncompressed (each object's raw_size).
  std::size_t stored_bytes = 0, raw_bytes = 0;
  std::size_t orphans = 0, orphan_bytes = 0;  // objects no readable entry uses (orphans)
  std::string collection_blocked;             // why gc collects none of them now ("" when it does)
  std::size_t later_format_objects = 0;       // objects no entry uses of a later cache format (never collected here)
  std::size_t templates = 0, template_bytes = 0;  // capture templates
  std::size_t regions = 0, region_bytes = 0;      // compiled regions (regions/)
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
  // With an entry: the compile regions its program calls, each with whether
  // regions/ holds it compiled for the entry's settings ("<region>: in
  // regions/ (a compile of another depth or layout takes it)" or "...: not
  // in regions/ (the next compile calling it compiles it)").
  std::vector<std::string> regions;
  // Without: the misses of the last job that missed (MissRecord::job), and
  // how many other jobs' misses stats.json keeps.
  std::vector<MissRecord> misses;
  std::string job;
  std::size_t earlier_jobs = 0;
};
// `entry` empty: the last job's recorded misses; else `entry` against its nearest, its
// pieces and its dynamic dims (an entry that is only pieces is explained).
Explanation explain(const std::string& dir, const std::string& entry);

struct Transfer {
  std::size_t entries = 0, objects = 0, bytes = 0, templates = 0;
  // Tuning decisions and dynamic-shape dims carried (import, pull: those new
  // to the directory).
  std::size_t tuning = 0, profile_dims = 0;
  // Import and pull: the compiled regions the objects hold that were new
  // to regions/ (cache/region_copies.h).
  std::size_t regions = 0;
  // Import and pull: entries left out because the cache holds their path
  // saved later (Store::Commit::keep_later).
  std::size_t kept_later = 0;
};
// The Mega-Cache bundle of a whole cache, written to `file` (0600).
// Under the store lock shared (`wait_s`): writers go on, no sweep runs.
Transfer export_bundle(const std::string& dir, const std::string& file, double wait_s = kAdminWaitSeconds);
// Fills `dir` from a bundle: validated entirely first; a bad bundle is a
// CacheError and changes nothing.
Transfer import_bundle(const std::string& file, const std::string& dir);
// The same for bundle bytes (load_cache_artifacts).
Transfer import_bytes(std::string_view bytes, const std::string& dir);
// The same for records (the remote tier's pull): validated entirely, then
// committed (objects published, indexes updated under their locks). The
// regions of the objects are copied into regions/ (cache/region_copies.h)
// but for those in `b.unvouched`: those the bundle's writer's store did not
// vouch for, or, for a pull, every object of an unsigned remote (its
// programs are claims, whose regions are never spread).
Transfer import_records(Bundle b, const std::string& dir);
// Every entry of a cache and the objects they use (export, remote push);
// CacheError when an index is damaged (verify --repair first). With
// `vouch`, `unvouched` names the objects whose regions the cache's
// regions/ does not hold as their programs have them (unvouched_regions).
Bundle read_cache(const std::string& dir, double wait_s = kAdminWaitSeconds, bool vouch = true);
// Of `keys` (objects of `b`), those holding compiled regions that `s`'s
// regions/ (none when `s` is null) does not hold every one of as the
// object's program has it, under the settings every entry of `b` using it
// agrees on (cache/region_copies.h, regions_held; nothing is marked used):
// what a bundle made from `s` names unvouched. A region file refused or
// an object not decoded vouches for nothing.
std::set<std::string> unvouched_regions(const Store* s, const Bundle& b, const std::set<std::string>& keys);

struct ClearResult {
  bool had_cache = false;
  std::size_t removed = 0;
  std::vector<std::string> left;    // files that are not npucache's, left as they were
  std::vector<std::string> in_use;  // lock files and temporaries a running process holds, left
  std::vector<std::string> files;   // with dry_run: the files it would remove
};
// Removes the cache's files (but locks/sweep.lock, and the lock files
// running processes hold: a compile claim, the tuning table's lock) under
// the store lock
// exclusively, taken within `wait_s` (else CacheBusy, nothing removed). A
// directory without a cache is reported and nothing is created. With
// `dry_run`: no lock, nothing removed; `files` lists what would be (every
// lock file among them: whether one is held is known only when clearing).
ClearResult clear(const std::string& dir, double wait_s = kAdminWaitSeconds, bool dry_run = false);

}  // namespace npucache::cache::admin
