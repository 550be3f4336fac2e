// The cache's figures for Prometheus: the text exposition format 0.0.4
// (# HELP and # TYPE lines, label values escaped), as `npucache stats
// --format prometheus` prints it and as the metrics file is written.
//
// The metrics file (NPUCACHE_METRICS_FILE=PATH, for node_exporter's
// textfile collector): a process using the library rewrites PATH
// atomically (a temporary file beside it, then rename) every
// NPUCACHE_METRICS_INTERVAL seconds (default 5; a positive number, at most
// 3600) from a background thread, and once more when its context flushes
// (at exit). One process writes one file: in an MPI job only rank 0
// writes, and a job that sums its ranks' counters (npucache warmup, infer)
// gives rank 0 that sum (set_job_counters). A file that cannot be written
// is warned about once and the process goes on.
#pragma once

#include "storage/stats.h"

#include <cstdint>
#include <filesystem>
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

// The sizes of the cache directory `dir` (nothing when it is not a cache).
CacheBytes cache_bytes(const std::filesystem::path& dir);

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

// Starts the metrics file of the context `c` when NPUCACHE_METRICS_FILE is
// set (stats.cpp calls it with the first counter; idempotent). A bad
// NPUCACHE_METRICS_INTERVAL is warned about and the default used.
void start_metrics_file(process::Context& c);

// From now on the metrics file of this process (when there is one) writes
// `counters` (a job's, summed over its ranks) in place of its own, and is
// written at once.
void set_job_counters(const CacheStats& counters);

}  // namespace npucache::storage
