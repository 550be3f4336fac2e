// The cache's figures for Prometheus: the text exposition format 0.0.4
// (# HELP and # TYPE lines, label values escaped), as `npucache stats
// --format prometheus` prints it and as the metrics file is written.
//
// The metrics file (NPUCACHE_METRICS_FILE=PATH, for node_exporter's
// textfile collector): a process using the library rewrites PATH
// atomically every NPUCACHE_METRICS_INTERVAL seconds (default 5; at least
// 1, at most 3600) from a background thread, and once more when its
// context flushes (at exit). The new text goes to a temporary beside PATH
// (".NAME.tmp.<pid>.<n>", not ending in .prom, so the collector skips it),
// created exclusively and never through a link (a name planted in a shared
// directory is skipped), mode 0644 less the umask, then renamed over PATH:
// a link at PATH is replaced, its target never written. One process writes
// one file: in an MPI job only rank 0 writes, and a job that sums its
// ranks' counters (npucache warmup, infer) gives rank 0 that sum
// (set_job_counters). A dry run (process/dry_run.h) never writes it, nor
// does a child forked from the process that started it. A file that cannot
// be written is warned about once and the process goes on.
//
// The cache's size it reports is read at most once a minute: each object
// file is stat'ed, and only a file not seen before has its header read (its
// raw size); an artifact's bytes are never read.
#pragma once

#include "storage/stats.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace npucache::process {
class Context;
}

namespace npucache::storage {

// A cache directory's size: its object files, and their artifacts uncompressed.
struct CacheBytes {
  uint64_t stored = 0, raw = 0;
};

// What cache_bytes learnt of a directory's object files, kept between its
// calls: an object file never changes, so one seen before (the same inode,
// size and time) is not read again.
struct KnownObjects {
  struct Known {
    uint64_t ino = 0;
    int64_t size = 0, mtime_ns = 0;
    uint64_t raw = 0;
  };
  std::map<std::string, Known> by_key;
};

// The sizes of the cache directory `dir` (nothing when it is not a cache):
// the object files' sizes, and the raw sizes their headers record (only
// read for the files `known` does not hold; `known` is then updated).
CacheBytes cache_bytes(const std::filesystem::path& dir, KnownObjects* known = nullptr);

// `value` escaped as a label value of the text format: \ " and newline.
std::string escape_label_value(std::string_view value);

// The exposition text of `counters` and, when known, the cache's size:
// npucache_hits_total{source=local|remote|other_layout|rank},
// npucache_misses_total{cause}, npucache_compiles_total,
// npucache_compile_seconds_avoided_total, npucache_saves_total,
// npucache_captures_total{kind=recorded|restored|recaptured},
// npucache_remote_operations_total{result=hit|miss|write|<error kind>},
// npucache_cache_bytes{kind=stored|raw}.
std::string prometheus_text(const CacheStats& counters, const std::optional<CacheBytes>& bytes);

// Seconds between the metrics file's writes: NPUCACHE_METRICS_INTERVAL when
// it is a number in [1, 3600], else (warned about) the default, 5.
double metrics_interval();

// Starts the metrics file of the context `c` when NPUCACHE_METRICS_FILE is
// set and the process is not a dry run (stats.cpp calls it with the first
// counter; idempotent).
void start_metrics_file(process::Context& c);

// From now on the metrics file of this process (when there is one) writes
// `counters` (a job's, summed over its ranks) in place of its own, and is
// written at once.
void set_job_counters(const CacheStats& counters);

}  // namespace npucache::storage
