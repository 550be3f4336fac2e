// dist::cache_compile's source: the MPI protocol of
// include/npucache/coordinator.h. The shared duty (timing, RNG refusal,
// persistence, reports) is MethodSource's; this class decides only how the
// artifact is obtained: collectively, as a sequence of named phases
// (phase.h), each a short function over the call's state (protocol.h),
// with the ranks' agreement (agreement.h) after each phase in which a rank
// can fail on its own. It reaches the other ranks through its transport
// (transport.h).
#pragma once

#include <npucache/coordinator.h>

#include "cache/source.h"
#include "coord/agreement.h"
#include "coord/job_progress.h"
#include "coord/protocol.h"
#include "coord/region_plan.h"
#include "format/bundle.h"

namespace npucache::coord {

class CoordinatedSource final : public cache::MethodSource {
 public:
  CoordinatedSource(std::shared_ptr<cache::MethodCache> cache, const dist::CoordinatorOptions& options,
                    ReportSink sink);

 private:
  // Automatic dynamic: this rank's profile from its cache, merged across the
  // job's ranks (a dim dynamic on any rank is dynamic on all, as PyTorch's
  // PGO merges rank profiles), so that the ranks keep tracing the same
  // graphs and sharing programs. One bounded all-reduce.
  void load_profile(const FlatArgs& args, std::vector<DimMark>& dims) override;
  std::shared_ptr<compiler::CompiledGraph> obtain(const FlatArgs& args, const compiler::TraceStep& trace,
                                                  const compiler::CompileStep& compile) override;
  // A new shape after the first call: no collective (the ranks are not in
  // step); the rendezvous of storage/claims.h in this rank's store, each
  // wait bounded by options_.shape_wait_s (later_shapes.cpp).
  std::shared_ptr<compiler::CompiledGraph> obtain_later(TraceResult trace, const cache::GraphId& id,
                                                        const FlatArgs& args,
                                                        const compiler::CompileStep& compile) override;
  // Graph breaks: in a dry run a piece is predicted with its method, never
  // compiled or stored: its first call throws DryRunEnd.
  std::shared_ptr<compiler::EntrySource> piece_source(const std::string& piece_method) override;

  // The phases, in order. arrive() returns false when every rank hit (the
  // warm path: nothing else runs).
  bool arrive(Call& c);
  void plan(Call& c);
  void read_remote(Call& c);  // the plan's reads from the remote tier
  void produce(Call& c);      // compile
  // Between the region waves (region_plan.h): each region compiled in the
  // first wave sent to every owner of the other stores needing it, stored
  // there for the second wave's compiles.
  void exchange_regions(Call& c, const RegionPlan& waves);
  // The owner's object: read from its store, or compiled (with this rank
  // as its producer, its compile time and passes).
  cache::ObjectRecord owned_object(Call& c);
  LocalFailure exchange(Call& c);
  void load(Call& c, LocalFailure carried);
  void persist(Call& c);
  // Per group, 0 when the owners vouch for the regions of the program a
  // rank brings into another store (one all-reduce when one does).
  std::vector<std::uint64_t> vouch_regions(Call& c);
  // A dry run (CoordinatorOptions::dry_run) ends after the plan and the
  // remote reads: the predicted outcome is reported, DryRunEnd thrown.
  [[noreturn]] void predict(Call& c);
  // The writer's half of persist: commits its store's entries and answers
  // each sender.
  LocalFailure commit_store(Call& c, const std::vector<int>& senders, cache::Bundle mine);
  // Runs the object the store kept for this rank's key, another writer's
  // (`wire`: a bundle of it); a failure is carried to the agreement.
  LocalFailure run_kept(Call& c, const std::string& wire);

  // What the ranks agreed after a phase: a survivable failure makes this
  // rank go on uncached, warned once.
  void settle(const Agreed& a, Call& c);
  // How the call's rank-methods became ready, per host (one element when
  // the map of hosts was not made), from what rank 0 holds.
  std::vector<Outcome> outcome_per_host(const Call& c, const Hosts* hosts) const;
  // Rank 0's info line for the method (the ranks' own entry lines are
  // debug lines: MethodIdentity::summarised) and its progress line.
  void summarise(const Call& c);
  mpi::Step step(const std::string& what);
  // A region another rank (or process) is compiling is waited for as a
  // new shape's graph is (shape_wait_s).
  double region_wait_s() const override { return options_.shape_wait_s; }

  dist::CoordinatorOptions options_;
  std::string uncached_why_;  // the warning of the last agreed survivable failure (settle)
  dist::StepReport steps_;
};

}  // namespace npucache::coord
