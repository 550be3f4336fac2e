// A dry run: a process that predicts what its jobs would do with the
// caches and writes nothing to them (no entries, objects, statistics,
// profiles, templates, remote writes, tuning, repairs). A service of the
// process context (context.h), off by default; the coordinator's dry run
// (dist::CoordinatorOptions::dry_run) turns it on, and every writer that a
// lookup or plan can reach asks it: the statistics record nothing, a
// lookup neither heals an index nor removes a damaged object, the plan
// creates no cache directory.
// A process is one or the other for good: the first cached function built
// claims it (claim()) and a function of the other kind is refused, since
// the switch is process-wide (a real function in a dry-run process would
// write nothing, a dry-run one would silence the real ones built before).
// Behind that, the writers a dry run never reaches refuse to run in one:
// saving an entry, a profile or a capture template throws.
// Thread safety: every member may be called from any thread.
#pragma once

#include "process/context.h"

#include <atomic>

namespace npucache::process {

class DryRun {
 public:
  bool on() const { return state_.load() == kDry; }
  // Claims the process for a dry run (`dry`) or a real one; false when it
  // is already claimed for the other (the caller refuses the function).
  bool claim(bool dry) {
    int expected = kNone;
    const int want = dry ? kDry : kReal;
    return state_.compare_exchange_strong(expected, want) || expected == want;
  }

 private:
  static constexpr int kNone = 0, kReal = 1, kDry = 2;
  std::atomic<int> state_{kNone};
};

// Whether this process is a dry run.
inline bool dry_run() { return Context::current().get<DryRun>().on(); }

}  // namespace npucache::process
