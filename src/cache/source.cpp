#include "cache/source.h"

#include "cache/cache_error.h"
#include "log/log.h"

#include <chrono>
#include <ctime>

namespace npucache::cache {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of the calling thread (compiles, autotuning included, run on it).
double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

MethodSource::MethodSource(std::shared_ptr<MethodCache> cache, ReportSink sink)
    : cache_(std::move(cache)), sink_(std::move(sink)) {
  report_.method = cache_->method();
}

std::shared_ptr<compiler::CompiledGraph> MethodSource::first_call(const FlatArgs& args,
                                                                  const compiler::TraceStep& trace,
                                                                  const compiler::CompileStep& compile) {
  const double t0 = now();
  auto g = obtain(args, trace, compile);
  report_.total_s = now() - t0;
  if (sink_) sink_(report_);
  return g;
}

void MethodSource::recompiled(const TraceResult& trace) {
  log::warn("Skip cache as {} recompiled", trace.name);
  if (disabled_) return;
  try {
    cache_->remove_entry();
  } catch (const CacheError& e) {
    log::warn("could not remove {} from the cache: {}", cache_->where(), e.what());
  }
}

TraceResult MethodSource::trace_checked(const compiler::TraceStep& trace) {
  const double t = now();
  TraceResult tr = trace();
  report_.trace_s = now() - t;
  if (const Node* n = first_rng_node(tr.graph))
    throw ConfigError("cache_compile cannot cache " + tr.name + ": node '" + n->name + "' (" +
                      std::string(op_name(n->op)) +
                      ") draws random numbers, and a cached graph would replay them; remove the RNG op or "
                      "use compile() instead. Nothing was written");
  return tr;
}

std::shared_ptr<compiler::CompiledGraph> MethodSource::compile_timed(TraceResult tr, const FlatArgs& args,
                                                                     const compiler::CompileStep& compile) {
  const double t = now(), c = thread_cpu();
  const SymBindings b = tr.signature.bind(args);
  auto g = compile(std::move(tr), b);
  report_.compile_s = now() - t;
  report_.compile_cpu_s = thread_cpu() - c;
  report_.compiled = true;
  return g;
}

void MethodSource::persist(const compiler::CompiledGraph& g, const GraphId& id) {
  report_.graph_key = id.key;
  if (disabled_) return;
  const double t = now();
  try {
    ObjectRecord o = cache_->make_object(g, id);
    report_.artifact_bytes = o.raw.size();
    report_.artifact_checksum = o.meta.checksum;
    cache_->save({o}, {cache_->make_entry(g, o)});
    report_.writer = true;
  } catch (const CacheError& e) {
    log::warn("could not save {} to the cache ({}); continuing uncached", cache_->where(), e.what());
  }
  report_.persist_s = now() - t;
}

std::shared_ptr<compiler::CompiledGraph> LocalSource::obtain(const FlatArgs& args, const compiler::TraceStep& trace,
                                                             const compiler::CompileStep& compile) {
  MethodCache::Lookup hit = cache().lookup(args, compile);
  if (hit.hit()) {
    report().hit = true;
    report().graph_key = hit.entry->graph_key;
    return hit.graph;
  }
  if (hit.reason == MissReason::refused) disabled_ = true;
  TraceResult tr = trace_checked(trace);
  const GraphId id = cache().graph_id(tr.graph);
  report().owner = cache().who().global_rank;
  auto g = compile_timed(std::move(tr), args, compile);
  persist(*g, id);
  return g;
}

}  // namespace npucache::cache
