// Hit/miss counters kept by the library in <cache_dir>/stats.json, with
// each entry's last use (for LRU gc) and the recent misses with the key
// components that differed, each with the job that missed (for `npucache
// explain`, which shows the last job's). The record_* calls
// only accumulate in memory (they are on the warm-start path; a dry run,
// process/dry_run.h, records nothing); the
// counters are merged into the file, under the cache lock and by atomic
// rename, by flush_stats() and when the process exits normally. A stats
// failure never fails a cache operation (it is logged at debug level); a
// stats.json that cannot be read is left as it is, never replaced. Dates are
// the Env's wall clock (process/env.h).
#pragma once

#include "storage/uses.h"

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::storage {

struct MissRecord {
  double time = 0;
  std::string entry;
  std::string reason;                    // "absent", "stale", "corrupt", ...
  std::vector<std::string> differences;  // "component: stored 'a', now 'b'"
  // The job that missed: the launcher's job (PMIx namespace, Open MPI job
  // id, Slurm job and step), else this process (host:pid:start time); empty
  // in records written before jobs were recorded.
  std::string job;
};

// This process's job, as MissRecord::job records it.
std::string this_job();
// Names this process's job from now on: a job of several ranks started by
// a launcher that sets none of the variables above gives every rank rank
// 0's this_job() (the multi-rank commands broadcast it), so its misses
// stay one job's.
void set_this_job(const std::string& job);
// The misses of the job of the newest record, oldest first (all of them
// when no record names its job).
std::vector<MissRecord> last_job_misses(const std::vector<MissRecord>& misses);

// What the remote tier did for jobs using this directory (remote_tier.h).
struct RemoteCounters {
  uint64_t hits = 0;    // objects (or entries) served from the remote, every check passed
  uint64_t misses = 0;  // the remote held nothing for the key
  uint64_t writes = 0;  // objects and records written to it
  std::map<std::string, uint64_t>
      errors;  // by kind: refused, timeout, auth, full, dropped, server, corrupt, too_large, untrusted
  uint64_t bytes_read = 0, bytes_written = 0;
  double time_s = 0;  // spent in remote calls
  // Of a tier of several servers: by shard (its URL as shown), its failures
  // by kind and "skipped", the calls not made because it had failed (its
  // keys that were misses). Absent from files written before shards.
  std::map<std::string, std::map<std::string, uint64_t>> shards;
  bool empty() const {
    return hits == 0 && misses == 0 && writes == 0 && errors.empty() && time_s == 0 && shards.empty();
  }
};

// Where a lookup that missed its own entry got its program from: the
// remote tier, the store's object of the same computation (another
// layout's, or one an entry that could not serve pointed at), another rank
// of the job (the coordinator's exchange), or a compile. Local hits are
// `hits`.
enum class Served { remote, other_layout, rank, compiled };

// The misses stats.json keeps: enough for the last job of a few hundred
// rank-methods and the jobs before it.
inline constexpr std::size_t kKeptMisses = 512;

struct CacheStats {
  uint64_t hits = 0, misses = 0, saves = 0;
  // Of the misses: how each was served (record_served), and their causes
  // ("absent", "stale", ...: MissRecord::reason).
  uint64_t hits_remote = 0, hits_other_layout = 0, hits_rank = 0, compiles = 0;
  std::map<std::string, uint64_t> misses_by_cause;
  // Reduce-overhead captures: recorded (and saved as templates), restored
  // from a template instead of captured, stored templates not usable.
  uint64_t captures = 0, restores = 0, recaptures = 0;
  std::map<std::string, uint64_t> recaptures_by_reason;  // compiler::recapture_cause -> count
  // Compile regions of the methods compiled: taken compiled from the
  // store's regions/ (region_hits) or compiled (region_compiles); and
  // region files written into regions/ from objects that came from
  // elsewhere (region_copies: another store of the job, an import, a
  // signed remote's pull or hit; cache/region_copies.h).
  uint64_t region_hits = 0, region_compiles = 0, region_copies = 0;
  double compile_time_saved_s = 0;          // compile time of the programs served by hits of any source
  std::map<std::string, double> last_used;  // entry path -> unix time
  std::vector<MissRecord> recent_misses;    // newest last, at most kKeptMisses
  RemoteCounters remote;
};

// What parses of stats.json (a damaged file starts afresh); an I/O error
// reading it is an IoError (gc then evicts nothing by age on a guess).
CacheStats read_stats(const std::filesystem::path& dir);
// `compile_seconds`: what the entry's object cost to compile (saved by the hit).
void record_hit(const std::filesystem::path& dir, const std::string& entry, double compile_seconds);
void record_miss(const std::filesystem::path& dir, const MissRecord& miss);
// Adds a remote call's counts (accumulated like the others).
void record_remote(const std::filesystem::path& dir, const RemoteCounters& delta);
void record_save(const std::filesystem::path& dir, const std::vector<std::string>& entries);
// Entries an import or a pull wrote: their last use is now, as a save's
// (gc's age is not the bundle's dates); not counted as saves.
void record_written(const std::filesystem::path& dir, const std::vector<std::string>& entries);
// A miss served without this rank's entry: `compile_seconds` is what the
// program it got cost to compile (0 for `compiled`, or when unknown).
void record_served(const std::filesystem::path& dir, Served how, double compile_seconds);
// `cause`: the recaptures' reason (compiler::recapture_cause), counted in
// recaptures_by_reason too.
void record_captures(const std::filesystem::path& dir, uint64_t captures, uint64_t restores, uint64_t recaptures,
                     const std::string& cause = "");
// A compile of a method with compile regions: `hits` taken from the
// store's compiled regions, `compiles` compiled.
void record_regions(const std::filesystem::path& dir, uint64_t hits, uint64_t compiles, uint64_t copies = 0);
// The counters this process recorded since it started, summed over its
// cache directories (no last-use times or miss records): the figures of a
// serving process's metrics (metrics.h).
CacheStats process_counters();
// Adds every counter of `counters` to `into` (not last-use times or misses).
void add_counters(CacheStats& into, const CacheStats& counters);
// The counters as JSON (stats.json's fields, without last-use times or
// misses), and back (fields missing or damaged are zero): the job report
// carries each rank's this way.
std::string counters_json(const CacheStats& counters);
CacheStats counters_from_json(std::string_view text);
// The cache directories this process recorded anything for.
std::vector<std::filesystem::path> process_dirs();
// Merges the accumulated counters into every touched stats file.
void flush_stats();
// Makes the process's accumulated counters now, without flushing: services
// made after them (the commit queue) flush, and so finish, before the
// counters flush (process/context.h).
void make_stats_counters();
// Zeroes the counters, keeping last-use times.
void zero_stats(const std::filesystem::path& dir);
// Removes the statistics file.
void clear_stats(const std::filesystem::path& dir);
// Drops last-used records of entries that no longer exist.
void forget_entries(const std::filesystem::path& dir, const std::vector<std::string>& entries);

}  // namespace npucache::storage
