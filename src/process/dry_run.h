// A dry run: a process that predicts what its jobs would do with the
// caches and writes nothing to them (no entries, objects, statistics,
// profiles, templates, remote writes, tuning, repairs). A service of the
// process context (context.h), off by default; the coordinator's dry run
// (dist::CoordinatorOptions::dry_run) turns it on, and every writer that a
// lookup or plan can reach asks it: the statistics record nothing, a
// lookup neither heals an index nor removes a damaged object, the plan
// creates no cache directory.
// Thread safety: on() and set() may be called from any thread.
#pragma once

#include "process/context.h"

#include <atomic>

namespace npucache::process {

class DryRun {
 public:
  bool on() const { return on_.load(); }
  void set(bool on) { on_.store(on); }

 private:
  std::atomic<bool> on_{false};
};

// Whether this process is a dry run.
inline bool dry_run() { return Context::current().get<DryRun>().on(); }

}  // namespace npucache::process
