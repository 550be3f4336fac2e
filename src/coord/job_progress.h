// Rank 0's progress line for a job (log::Progress is a tty line for one long piece of work on one thread): after each coordinated method, the job's
// rank-methods ready so far (of the total when the job said how many
// methods it runs), how each became ready (loaded from its own store,
// compiled, received from another rank or the remote tier) and the same per
// host when the job made its map of hosts; before a method's compiles, what
// is about to be compiled, so a long cold job says what it waits for.
//
// Computed at rank 0 from what the protocol already holds (the key
// all-gather, the plan, the remote reads): no message is added. Printed to
// stderr, one line per event, only when enabled: NPUCACHE_PROGRESS=1 or 0
// forces it on or off; otherwise a job's --progress (always, never, auto)
// decides, auto meaning stderr is a terminal (under mpirun a rank's stderr
// is a pipe: the launcher sets NPUCACHE_STDERR_IS_TTY=1 when its own is
// one). A program linking the library gets it with NPUCACHE_PROGRESS=1.
#pragma once

#include "coord/plan.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace npucache::coord {

// How the rank-methods of one method, or of the job so far, became ready.
struct Outcome {
  int loaded = 0;    // its own entry (or its owner's store) had it
  int compiled = 0;  // this rank compiled it
  int received = 0;  // from its owner, a host's reader, or the remote tier
  int total() const { return loaded + compiled + received; }
  Outcome& operator+=(const Outcome& o);
};

// Per rank, from the plan (pure): a rank that hit loaded; a needer whose
// group's source (`source` per group: its owner after the remote reads,
// or -1 when every host read it from the remote tier) is itself compiled,
// or loaded when its store held the artifact; any other needer received.
// Per host of `host_of` (hosts numbered 0..hosts-1).
std::vector<Outcome> outcomes(const Plan& plan, const std::vector<RankInfo>& ranks, const std::vector<int>& source,
                              const std::vector<int>& host_of, int hosts);

enum class ProgressMode { auto_, always, never };
ProgressMode parse_progress_mode(const std::string& s);  // ConfigError naming the choices

class JobProgress {
 public:
  // The process's (a service of its context).
  static JobProgress& get();

  // A job's settings: its mode and how many methods it runs (0: unknown).
  void configure(ProgressMode mode, int expected_methods);
  bool enabled() const;
  void set_output(std::FILE* out) { out_ = out; }  // tests

  // Before the compiles of `method`: `subgraphs` to compile on `owners` ranks.
  void compiling(const std::string& method, int subgraphs, int owners, int world);
  // After `method`: its outcome over the job (per host when known; one
  // element when the map of hosts was not made), and the method's seconds.
  void finished(const std::string& method, int world, const std::vector<Outcome>& per_host,
                const std::vector<std::string>& host_names, bool uncached, double seconds);

  // The line `finished` last made (without the newline), printed or not.
  std::string line() const;

 private:
  mutable std::mutex mu_;
  ProgressMode mode_ = ProgressMode::auto_;
  int expected_methods_ = 0;
  int methods_ = 0;
  Outcome job_;
  std::vector<Outcome> hosts_;  // summed per host over methods that knew them
  // Methods where every rank hit before the map of hosts was made: each of
  // a host's ranks loaded them, counted once the map is known.
  int unmapped_all_hit_ = 0;
  std::vector<std::string> host_names_;
  double seconds_ = 0;
  std::string last_;
  std::FILE* out_ = stderr;
  void print(const std::string& s) const;
};

}  // namespace npucache::coord
