// The process-wide tuning table: autotune decisions shared by every compile
// of the process, keyed by kernel signature (AutotuneDecision::key: op,
// operand and result types, the attributes that change the kernel) and
// runtime version (tuning_runtime()), like XLA's autotune cache or
// TensorRT's timing cache. A kernel whose signature the table holds is not
// timed again: autotune() applies the stored choice (compile_graph counts
// it as reused), so layers, graphs and models of equal shapes are tuned
// once per process. The cache layer persists the table in the cache
// directory (cache/tuning_file.h) and merges it in before compiling.
//
// Which entry wins: an entry replaces another of the same (runtime, key)
// only when it compared more candidates; otherwise the first one stays, so
// a decision once used keeps being used. Entries of other runtimes are
// kept (they are persisted again) but never found for this one.
//
// Thread safety: every member may be called from any thread. Two threads
// tuning the same new signature at the same time may both time it (the
// first to finish is kept).
#pragma once

#include "compiler/autotune.h"

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npucache::compiler {

struct TuningEntry {
  std::string chosen;  // "tile_m=32 tile_n=256 tile_k=128"
  double best_us = 0;
  double default_us = 0;
  int candidates = 0;    // candidates compared (0: not timed, the default)
  std::string timed_on;  // as AutotuneDecision::timed_on
  friend bool operator==(const TuningEntry&, const TuningEntry&) = default;
};

struct TuningRecord {
  std::string runtime;  // "simnpu-v1 runtime 1.0.0"
  std::string key;      // "matmul f32[8, 64] f32[64, 192] f32[8, 192]"
  TuningEntry entry;
  friend bool operator==(const TuningRecord&, const TuningRecord&) = default;
};

class TuningTable {
 public:
  // The one table of the process (a service of the process context,
  // process/context.h).
  static TuningTable& process();

  std::optional<TuningEntry> find(const std::string& runtime, const std::string& key) const;
  // Adds `e` (see "Which entry wins"); true when the table changed.
  bool add(const std::string& runtime, const std::string& key, const TuningEntry& e);
  // Adds every record; returns how many changed the table.
  std::size_t merge(const std::vector<TuningRecord>& records);
  // Every entry, ordered by (runtime, key).
  std::vector<TuningRecord> records() const;
  std::size_t size() const;
  // Forgets everything (tests and benchmarks).
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, TuningEntry> entries_;
};

// The runtime a decision holds for: "<device name> runtime <runtime
// version>" of `device`. The cache key's runtime_version component is this
// same text (coord/identity.cpp calls it), so the two cannot drift apart.
std::string tuning_runtime(int device);

// The table entry of a decision and back (steps are per program: none).
TuningEntry tuning_entry(const AutotuneDecision& d);
// Adds the decisions of a compiled graph (another rank's artifact, a stored
// object) to the process table; returns how many changed it.
std::size_t merge_decisions(const std::vector<AutotuneDecision>& decisions, const std::string& runtime);

}  // namespace npucache::compiler
