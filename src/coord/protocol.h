// The state of one coordinated first call (coordinated_source.h), handed
// from phase to phase: what each phase found and the next one needs.
#pragma once

#include <npucache/coordinator.h>

#include "cache/method_cache.h"
#include "compiler/entry_source.h"
#include "coord/context.h"
#include "coord/plan.h"
#include "coord/remote_plan.h"
#include "coord/transport.h"
#include "process/context.h"
#include "process/env.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::coord {

// Seconds on the process context's monotonic clock (process/env.h).
inline double now() { return process::Context::current().env().monotonic_s(); }

// Seconds since the last lap, added to *into.
class Laps {
 public:
  void lap(double* into) {
    const double t = now();
    *into += t - last_;
    last_ = t;
  }

 private:
  double last_ = now();
};

struct Call {
  Call(const FlatArgs& a, const compiler::TraceStep& t, const compiler::CompileStep& c, const Transport& n)
      : args(a), trace(t), compile(c), net(n), me(n.rank()) {}

  const FlatArgs& args;
  const compiler::TraceStep& trace;
  const compiler::CompileStep& compile;
  const Transport& net;
  const Hosts* hosts = nullptr;  // made after an arrival that agreed some rank misses
  const int me;
  Laps laps;
  // A survivable failure was agreed: every rank goes on, nothing is written.
  bool uncached = false;

  // Arrival.
  std::optional<TraceResult> tr;  // this rank's trace (the fast path traces only on a miss)
  cache::GraphId id;
  cache::MethodCache::Lookup hit;
  // Plan.
  RankInfo info;                    // this rank's record of the key all-gather
  std::vector<std::string> params;  // this rank's parameter names, placeholder order
  std::vector<RankInfo> infos;      // every rank's
  Plan plan;
  std::vector<int> source;  // per group: its owner after the remote reads, -1 when every host read it
  int group = -1;           // this rank's key group (-1: nothing to do)
  int owner = -1;           // its owner
  RemoteFetch remote;
  bool from_remote = false;         // this rank's group is served by the remote tier, on every host
  bool nobody_produces = false;     // every group is: no owner can fail
  std::vector<bool> read_remotely;  // per group: a fetcher read it from the remote tier (nobody compiles it)
  // Compile and exchange: the program as it travels, a bundle of one
  // object record (the owner's: its producer, compile time and passes).
  std::string wire;
  bool compiled_here = false;    // this rank compiled its group's program in this job (an owner)
  std::string shipped_checksum;  // the checksum of the object an owner read from its store and sent
  bool kept_other = false;       // this rank runs the object its store kept, another writer's (run_kept)
  // Load: the object and the program this rank runs.
  cache::ObjectRecord object;
  std::shared_ptr<compiler::CompiledGraph> g;
};

}  // namespace npucache::coord
