// The cache's EntrySource family. MethodSource does the duty every source
// shares (as spdlog's base_sink does the locking): the first call's timing,
// status and report, the refusal of graphs with RNG ops, persisting through
// the MethodCache, and the recompile rule. A subclass only decides how the
// artifact is obtained (obtain()): LocalSource loads or compiles; the MPI
// coordinator (src/coord) runs its protocol.
#pragma once

#include <npucache/cache.h>

#include "cache/method_cache.h"
#include "cache/uses.h"
#include "compiler/entry_source.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace npucache::cache {

// Where a rank-method's program came from, as the job report and `npucache
// stats` name it: "hit_local" (its own entry), "hit_remote" (this rank read
// the remote tier), "reused_other_layout" (this rank read the store's
// object of the same computation: another layout's, or one its own entry
// could not serve), "received" (from another rank of the job), "compiled".
std::string_view served_from(const MethodReport& r);

class MethodSource : public compiler::EntrySource {
 public:
  // Where reports go: `add` keeps a new record (a first call's, a later
  // call's) and returns its ticket; `amend` replaces the record of a
  // ticket (the first call's, once first_call_end timed its bind and first
  // run). Either may be empty.
  struct ReportSink {
    std::function<std::uint64_t(const MethodReport&)> add;
    std::function<void(std::uint64_t, const MethodReport&)> amend;
  };

  compiler::FirstEntry first_call(const FlatArgs& args, const compiler::TraceStep& trace,
                                  const compiler::CompileStep& compile) final;
  // Warns "Skip cache as <name> recompiled" with the reason, and removes
  // this rank's entry.
  void recompiled(const TraceResult& trace, const std::string& why) final;
  // Completes the first call's WarmPhases (the engine's bind, the first
  // run, ready_s) and amends its report.
  void first_call_end(const FirstCallEnd& end) noexcept final;
  // The method's profile from the cache directory (profiles.h5).
  void load_profile(const FlatArgs& args, std::vector<DimMark>& dims) override;
  // Keeps the profile, then obtains the dynamic graph as a miss does (the
  // stored object of the same computation, else a compile) and saves it as
  // this rank's entry in place of the static one.
  std::optional<compiler::FirstEntry> recompile_dynamic(const FlatArgs& args, const compiler::TraceStep& trace,
                                                        const compiler::CompileStep& compile,
                                                        const std::vector<DimMark>& dims) final;
  // Adds `dims` to the method's profile (nothing in a dry run).
  void save_profile(const std::vector<DimMark>& dims) override;
  // A piece of the method split at graph breaks: an entry of its own,
  // loaded or compiled and saved as the method's entry is.
  std::shared_ptr<compiler::EntrySource> piece_source(const std::string& piece_method) override;

  const MethodReport& report() const { return report_; }

 protected:
  // `sink` receives the report of the first call (may be null).
  MethodSource(std::shared_ptr<MethodCache> cache, ReportSink sink);

  // How the artifact is obtained. `report()` is filled as it goes; the
  // outcome defaults to compiled.
  virtual std::shared_ptr<compiler::CompiledGraph> obtain(const FlatArgs& args, const compiler::TraceStep& trace,
                                                          const compiler::CompileStep& compile) = 0;

  // Traces (timed) and refuses a graph with RNG ops: ConfigError naming the
  // node; nothing is written.
  TraceResult trace_checked(const compiler::TraceStep& trace);
  // The graph id of a trace (timed: WarmPhases::key_s).
  GraphId graph_id_timed(const TraceResult& traced);
  // The lookup of this rank's entry: with `trace` (the default hit check)
  // or without (the fast path). Records the miss reason in the report.
  MethodCache::Lookup lookup(const FlatArgs& args, const TraceResult* trace, const GraphId* id,
                             const compiler::CompileStep& compile);
  // A later call's new graph (automatic dynamic) that the store lacks:
  // compiled and saved here (the default), or, under the coordinator,
  // met with the other ranks that need it (claimed and compiled, or
  // loaded from the claimer's object). Sets report().later ("compiled",
  // "loaded", "waited_then_compiled") and later_wait_s.
  virtual std::shared_ptr<compiler::CompiledGraph> obtain_later(TraceResult trace, const GraphId& id,
                                                                const FlatArgs& args,
                                                                const compiler::CompileStep& compile);
  // Compiles (elapsed and CPU time recorded) for the call `args`, taking
  // the compiled regions the store holds and storing those it compiles
  // (region_library.h; report's regions_*).
  std::shared_ptr<compiler::CompiledGraph> compile_timed(TraceResult trace, const FlatArgs& args,
                                                         const compiler::CompileStep& compile);
  // Saves `g` under `id` as this rank's entry (timed) and returns the
  // program to run: `g`, or, when another writer stored the key first, the
  // stored program (every user of a key runs the same bytes). A save that
  // fails is logged once; the method continues uncached with `g`.
  std::shared_ptr<compiler::CompiledGraph> persist(std::shared_ptr<compiler::CompiledGraph> g, const GraphId& id,
                                                   const FlatArgs& args, const compiler::CompileStep& compile);
  // Saves only this rank's entry for an object the store already holds.
  void persist_entry(const compiler::CompiledGraph& g, const ObjectRecord& object);

  // How long a compile waits for a region another process is compiling.
  virtual double region_wait_s() const { return kRegionWaitSeconds; }
  static constexpr double kRegionWaitSeconds = 60;

  MethodCache& cache() { return *cache_; }
  MethodReport& report() { return report_; }
  // Set when the cache was refused: nothing is written.
  bool disabled_ = false;
  // What the program a miss was served with cost to compile (its object's
  // record), when an obtain() path knows it: the compile time it avoided.
  double served_compile_s_ = 0;

 private:
  std::shared_ptr<MethodCache> cache_;
  ReportSink sink_;
  MethodReport report_;
  std::optional<std::uint64_t> first_ticket_;  // the first call's record in sink_
};

// cache_compile's source: a hit loads; a miss traces, reads the stored
// object of the same computation when the store has one, else compiles and
// saves. `compile_every_miss` (the coordinator's independent baseline, as
// TorchAir and vLLM behave) compiles on every miss instead.
class LocalSource final : public MethodSource {
 public:
  LocalSource(std::shared_ptr<MethodCache> cache, ReportSink sink, bool compile_every_miss = false)
      : MethodSource(std::move(cache), std::move(sink)), compile_every_miss_(compile_every_miss) {}

 private:
  bool compile_every_miss_;
  // Reports and commits (in the background) a program the remote tier served.
  std::shared_ptr<compiler::CompiledGraph> served_by_remote(MethodCache::Stored fetched);
  std::shared_ptr<compiler::CompiledGraph> obtain(const FlatArgs& args, const compiler::TraceStep& trace,
                                                  const compiler::CompileStep& compile) override;
};

}  // namespace npucache::cache
