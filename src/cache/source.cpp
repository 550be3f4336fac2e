#include "cache/source.h"
#include "cache/region_library.h"

#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "log/log.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "process/env.h"
#include "storage/stats.h"

#include <chrono>
#include <ctime>

namespace npucache::cache {
namespace {

double now() { return process::Context::current().env().monotonic_s(); }

// CPU seconds of the calling thread (compiles, autotuning included, run on it).
double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

std::string_view served_from(const MethodReport& r) {
  if (r.hit) return "hit_local";
  if (r.compiled) return "compiled";
  if (r.fetched) return "received";
  if (r.remote) return "hit_remote";
  if (r.read_store) return "reused_other_layout";
  return "compiled";
}

namespace {

// The statistics counter of a miss served as `r` says.
storage::Served served_kind(const MethodReport& r) {
  const std::string_view from = served_from(r);
  if (from == "hit_remote") return storage::Served::remote;
  if (from == "reused_other_layout") return storage::Served::other_layout;
  if (from == "received") return storage::Served::rank;
  return storage::Served::compiled;
}

}  // namespace

MethodSource::MethodSource(std::shared_ptr<MethodCache> cache, ReportSink sink)
    : cache_(std::move(cache)), sink_(std::move(sink)) {
  report_.method = cache_->method();
}

namespace {

// Ends a call path of `cache` when it goes out of scope (MethodCache::end_call_path).
struct CallPath {
  const MethodCache& cache;
  ~CallPath() { cache.end_call_path(); }
};

}  // namespace

compiler::FirstEntry MethodSource::first_call(const FlatArgs& args, const compiler::TraceStep& trace,
                                              const compiler::CompileStep& compile) {
  const CallPath path{*cache_};
  const double t0 = now();
  compiler::FirstEntry first;
  first.graph = obtain(args, trace, compile);
  report_.total_s = now() - t0;
  // Served from the cache: the entry, or (its entry missing or stale) the
  // stored object of the same computation.
  const bool served = report_.hit || (report_.read_store && !report_.fetched);
  first.status.outcome = served ? Outcome::hit : report_.fetched ? Outcome::fetched : Outcome::compiled;
  first.status.cached = !disabled_ && (report_.hit || report_.saved);
  first.status.reason = report_.hit ? ""
                        : report_.remote
                            ? report_.reason + "; the remote cache's object of the same computation was used"
                        : served ? report_.reason + "; the stored object of the same computation was reused"
                                 : report_.reason;
  first.status.entry = cache_->where();
  // A local hit was counted by the lookup; a miss is counted by how it was served.
  if (!disabled_ && !report_.hit)
    storage::record_served(cache_->dir(), served_kind(report_), report_.compiled ? 0.0 : served_compile_s_);
  if (!disabled_ && cache_->captures() && names::valid_graph_key(report_.graph_key))
    first.templates = cache_->templates(report_.graph_key);
  if (sink_.add) first_ticket_ = sink_.add(report_);
  return first;
}

void MethodSource::first_call_end(const FirstCallEnd& end) noexcept {
  report_.warm.bind_s += end.bind_s;
  report_.warm.ready_s = end.ready_s;
  report_.warm.first_run_s = end.ran ? end.run_s : 0.0;
  try {
    if (first_ticket_ && sink_.amend) sink_.amend(*first_ticket_, report_);
  } catch (const std::exception& e) {  // a report not amended is a report, never a failed call
    log::debug("the first call's report of {} was not amended: {}", report_.method, e.what());
  }
}

void MethodSource::recompiled(const TraceResult& trace, const std::string& why) {
  log::warn("Skip cache as {} recompiled ({}); removed its cache entry {}", trace.name, why, cache_->where());
  if (disabled_) return;
  try {
    cache_->remove_entry();
  } catch (const CacheError& e) {
    log::warn("could not remove {} from the cache: {}", cache_->where(), e.what());
  }
}

void MethodSource::load_profile(const FlatArgs&, std::vector<DimMark>& dims) {
  if (disabled_) return;
  for (auto& m : cache_->load_profile()) dims.push_back(std::move(m));
}

void MethodSource::save_profile(const std::vector<DimMark>& dims) {
  if (!disabled_ && !process::dry_run()) cache_->save_profile(dims);  // a dry run writes nothing
}

std::optional<compiler::FirstEntry> MethodSource::recompile_dynamic(const FlatArgs& args,
                                                                    const compiler::TraceStep& trace,
                                                                    const compiler::CompileStep& compile,
                                                                    const std::vector<DimMark>& dims) {
  const CallPath path{*cache_};
  // The later call has a record of its own; the first call's is kept.
  const MethodReport first = report_;
  report_ = MethodReport{};
  report_.method = first.method;
  struct Restore {
    MethodReport& report;
    const MethodReport& first;
    ~Restore() {
      const bool saved = report.saved;
      report = first;
      report.saved = first.saved || saved;
    }
  } restore{report_, first};
  const double t0 = now();
  if (!disabled_) cache_->save_profile(dims);
  TraceResult tr = trace_checked(trace);
  const GraphId id = cache_->graph_id(tr);
  compiler::FirstEntry e;
  e.status.entry = cache_->where();
  if (!disabled_ && cache_->captures()) e.templates = cache_->templates(id.key);
  if (auto stored = disabled_ ? std::nullopt : cache_->stored(MethodCache::Tier::local, id, tr, args, compile)) {
    persist_entry(*stored->graph, stored->object);
    e.graph = std::move(stored->graph);
    e.status.outcome = Outcome::hit;
    e.status.reason = "the dynamic version was in the cache (stored object of the same computation)";
    report_.read_store = true;
    report_.later = "stored";
    if (!disabled_) storage::record_served(cache_->dir(), storage::Served::other_layout, 0.0);
  } else {
    e.graph = obtain_later(std::move(tr), id, args, compile);
    const bool loaded = report_.later == "loaded";
    e.status.outcome = loaded ? Outcome::fetched : Outcome::recompiled;
    if (loaded)
      e.status.reason = "the dynamic version was compiled by another rank of the job (its stored object, after " +
                        std::to_string(report_.later_wait_s) + " s)";
    if (!disabled_)
      storage::record_served(cache_->dir(), loaded ? storage::Served::rank : storage::Served::compiled,
                             loaded ? served_compile_s_ : 0.0);
  }
  e.status.cached = !disabled_ && report_.saved;
  report_.total_s = now() - t0;
  if (sink_.add) sink_.add(report_);
  return e;
}

std::shared_ptr<compiler::CompiledGraph> MethodSource::obtain_later(TraceResult tr, const GraphId& id,
                                                                    const FlatArgs& args,
                                                                    const compiler::CompileStep& compile) {
  report_.later = "compiled";
  report_.owner = cache_->who().global_rank;
  return persist(compile_timed(std::move(tr), args, compile), id, args, compile);
}

std::shared_ptr<compiler::EntrySource> MethodSource::piece_source(const std::string& piece_method) {
  if (disabled_) return nullptr;
  return std::make_shared<LocalSource>(cache_->for_method(piece_method), ReportSink{});
}

TraceResult MethodSource::trace_checked(const compiler::TraceStep& trace) {
  const double t = now();
  TraceResult tr = trace();
  report_.trace_s = now() - t;
  report_.warm.trace_s = report_.trace_s;
  if (const Node* n = first_rng_node(tr.graph))
    throw ConfigError("cache_compile cannot cache " + tr.name + ": node '" + n->name + "' (" +
                      std::string(op_name(n->op)) +
                      ") draws random numbers, and a cached graph would replay them; remove the RNG op or "
                      "use compile() instead. Nothing was written");
  return tr;
}

GraphId MethodSource::graph_id_timed(const TraceResult& traced) {
  const double t = now();
  GraphId id = cache_->graph_id(traced);
  report_.warm.key_s = now() - t;
  return id;
}

MethodCache::Lookup MethodSource::lookup(const FlatArgs& args, const TraceResult* trace, const GraphId* id,
                                         const compiler::CompileStep& compile) {
  MethodCache::Lookup r = cache_->lookup(args, trace, id, compile);
  if (r.hit()) {
    report_.hit = true;
    report_.graph_key = r.entry->graph_key;
    report_.warm.read_s = r.read_s;
    report_.warm.decode_s = r.decode_s;
    report_.warm.own_key_s = r.own_key_s;
    report_.warm.bind_s = r.bind_s;
  } else {
    report_.reason = r.reason_text();
    report_.cause = r.cause();
    if (r.reason == MissReason::refused) disabled_ = true;
  }
  return r;
}

std::shared_ptr<compiler::CompiledGraph> MethodSource::compile_timed(TraceResult tr, const FlatArgs& args,
                                                                     const compiler::CompileStep& compile) {
  if (!disabled_) cache_->load_tuning();  // decisions earlier jobs made, before timing any kernel
  const double t = now(), c = thread_cpu();
  const SymBindings b = tr.signature.bind(args);
  // The regions compiled before, or by another process now: taken as they are.
  std::optional<RegionLibrary> regions;
  if (!disabled_ && !tr.regions.empty()) {
    try {
      regions.emplace(cache_->region_store(), cache_->config(), cache_->region_validity(), region_wait_s());
    } catch (const Error& e) {  // no store to take regions from: the save reports the cache's problem
      log::debug("no compiled regions for {}: {}", cache_->method(), e.what());
    }
    if (regions) regions->prepare(tr);
  }
  report_.regions_compiled = report_.regions_reused = report_.regions_waited = 0;
  std::shared_ptr<compiler::CompiledGraph> g;
  if (regions && regions->reused() > 0) {
    // A region file that decodes but does not fit its calls fails the link,
    // or the compile past it (a size no call binds, a linked program that
    // does not validate): this compile then compiles every region, stored
    // in place of those files, so one bad file costs one compile. An
    // error of the method itself comes again from that compile.
    std::optional<TraceResult> again = tr;
    try {
      g = compile(std::move(tr), b, &regions->hints());
    } catch (const Error& e) {
      log::warn("{}: the compiled regions taken from {} do not fit this compile ({}); compiling them again",
                cache_->method(), cache_->dir(), e.what());
      regions->distrust();
      g = compile(std::move(*again), b, &regions->hints());
    }
  } else {
    g = compile(std::move(tr), b, regions ? &regions->hints() : nullptr);
  }
  if (regions) {
    regions->finish();
    report_.regions_reused = static_cast<int>(g->regions_reused.size());
    report_.regions_compiled = static_cast<int>(g->regions.size()) - report_.regions_reused;
    report_.regions_waited = regions->waited();
    storage::record_regions(cache_->dir(), static_cast<uint64_t>(report_.regions_reused),
                            static_cast<uint64_t>(report_.regions_compiled));
  }
  report_.compile_s = now() - t;
  report_.compile_cpu_s = thread_cpu() - c;
  report_.compiled = true;
  report_.pass_times_s.clear();
  for (const auto& p : g->timings) report_.pass_times_s.emplace_back(p.name, p.seconds);
  report_.kernels_tuned = g->kernels_tuned;
  report_.kernels_reused = g->kernels_reused;
  return g;
}

std::shared_ptr<compiler::CompiledGraph> MethodSource::persist(std::shared_ptr<compiler::CompiledGraph> g,
                                                               const GraphId& id, const FlatArgs& args,
                                                               const compiler::CompileStep& compile) {
  report_.graph_key = id.key;
  if (disabled_) return g;
  const double t = now();
  try {
    ObjectRecord o = cache_->make_object(*g, id);
    report_.artifact_bytes = o.raw.size();
    report_.artifact_checksum = o.meta.checksum;
    const Store::Committed done = cache_->save({{o}, {cache_->make_entry(*g, o)}, {}});
    report_.writer = true;
    report_.saved = true;
    // The rank that compiled writes back what the store kept: its own
    // object, or the one another writer stored first, which it then runs
    // (every user of a key runs the same bytes).
    const ObjectRecord& kept = done.kept.at(id.key);
    cache_->push_remote({kept}, done.entries);
    if (done.adopted.count(id.key)) {
      g = cache_->runnable(kept, parameter_names(g->trace.graph), args, compile);
      report_.artifact_checksum = kept.meta.checksum;
    }
  } catch (const CacheRefused& e) {
    warn_uncached(cache_->dir(), "refused", std::string(e.what()) + "; running uncached");
    disabled_ = true;
  } catch (const CacheError& e) {
    warn_uncached(cache_->dir(), "save",
                  "could not save " + cache_->where() + " to the cache (" + e.what() +
                      "); running uncached, the cache as it was is kept");
  }
  report_.persist_s = now() - t;
  return g;
}

void MethodSource::persist_entry(const compiler::CompiledGraph& g, const ObjectRecord& object) {
  report_.graph_key = object.graph_key;
  report_.artifact_checksum = object.meta.checksum;
  report_.artifact_bytes = object.raw.size();
  if (disabled_) return;
  const double t = now();
  try {
    // The object is pinned by the commit: stored again from this copy if a
    // sweep removed it since it was read.
    const Store::Committed done = cache_->save({{}, {cache_->make_entry(g, object)}, {object}});
    report_.writer = true;
    report_.saved = done.unpinned.empty();
  } catch (const CacheRefused& e) {
    warn_uncached(cache_->dir(), "refused", std::string(e.what()) + "; running uncached");
    disabled_ = true;
  } catch (const CacheError& e) {
    warn_uncached(cache_->dir(), "save",
                  "could not save " + cache_->where() + " to the cache (" + e.what() +
                      "); running uncached, the cache as it was is kept");
  }
  report_.persist_s = now() - t;
}

std::shared_ptr<compiler::CompiledGraph> LocalSource::served_by_remote(MethodCache::Stored fetched) {
  report().read_store = true;
  report().remote = true;
  report().graph_key = fetched.object.graph_key;
  report().remote_bytes = fetched.object.raw.size();
  served_compile_s_ = fetched.object.meta.compile_time_s;
  report().artifact_bytes = fetched.object.raw.size();
  report().artifact_checksum = fetched.object.meta.checksum;
  if (!disabled_) {  // committed locally off the path to ready: the next start is local
    cache().commit_later(*fetched.graph, fetched.object);
    report().saved = true;
    report().writer = true;
  }
  return fetched.graph;
}

std::shared_ptr<compiler::CompiledGraph> LocalSource::obtain(const FlatArgs& args, const compiler::TraceStep& trace,
                                                             const compiler::CompileStep& compile) {
  std::optional<TraceResult> tr;
  GraphId id;
  if (!cache().fast_path()) {  // the default: decide from this trace
    tr = trace_checked(trace);
    id = graph_id_timed(*tr);
  }
  MethodCache::Lookup hit = lookup(args, tr ? &*tr : nullptr, tr ? &id : nullptr, compile);
  if (hit.hit()) return hit.graph;
  if (!tr && !compile_every_miss_)  // the fast path: this rank's entry in the remote's index
    if (auto fetched = cache().remote_entry(args, compile)) return served_by_remote(std::move(*fetched));
  if (!tr) {
    tr = trace_checked(trace);
    id = graph_id_timed(*tr);
  }
  // The store may hold the artifact already (another rank, world size or
  // model stored it, or this entry's index was lost): a read, no compile.
  if (auto stored =
          compile_every_miss_ ? std::nullopt : cache().stored(MethodCache::Tier::local, id, *tr, args, compile)) {
    report().read_store = true;
    served_compile_s_ = stored->object.meta.compile_time_s;
    persist_entry(*stored->graph, stored->object);
    return stored->graph;
  }
  // Then the remote tier: read and checked, committed locally off the path
  // to ready.
  if (!compile_every_miss_)
    if (auto fetched = cache().stored(MethodCache::Tier::remote, id, *tr, args, compile))
      return served_by_remote(std::move(*fetched));
  // An entry was there but could not serve (stale, damaged, another
  // computation): its warning said "replacing it"; this says how.
  if (hit.reason != MissReason::absent && hit.reason != MissReason::refused)
    log::info("Cache entry {} is recompiled: no stored object of its graph {}", cache().where(), id.key);
  report().owner = cache().who().global_rank;
  return persist(compile_timed(std::move(*tr), args, compile), id, args, compile);
}

}  // namespace npucache::cache
