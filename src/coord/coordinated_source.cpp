#include "coord/coordinated_source.h"

#include <npucache/error.h>

#include "cache/artifact.h"
#include "cache/bundle.h"
#include "cache/cache_error.h"
#include "compiler/serialize.h"
#include "log/log.h"
#include "mpi/comm.h"

#include <chrono>
#include <functional>

namespace npucache::coord {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

CoordinatedSource::CoordinatedSource(std::shared_ptr<cache::MethodCache> cache, const dist::CoordinatorOptions& options,
                                     ReportSink sink)
    : MethodSource(std::move(cache), std::move(sink)), options_(options) {}

std::shared_ptr<compiler::CompiledGraph> CoordinatedSource::obtain(const FlatArgs& args,
                                                                   const compiler::TraceStep& trace,
                                                                   const compiler::CompileStep& compile) {
  MethodReport& rep = report();
  const mpi::Comm world = mpi::Comm::world();
  const int me = world.rank();
  world.arrive(static_cast<int>(std::hash<std::string>{}(cache().method()) & 0x3fffffff), options_.timeout_s,
               "cache_compile of " + cache().method());
  // 1. Own entry, decided from this rank's trace (or, on the fast path,
  // from code_version without one).
  std::optional<TraceResult> tr;
  cache::GraphId id;
  if (!cache().fast_path()) {
    tr = trace_checked(trace);
    id = cache().graph_id(*tr);
  }
  cache::MethodCache::Lookup hit = lookup(args, tr ? &*tr : nullptr, tr ? &id : nullptr, compile);
  const auto hits = world.allgather(hit.hit() ? "1" : "0");
  if (hits == std::vector<std::string>(hits.size(), "1")) return hit.graph;
  // 2-3. Misses trace; everyone reports key, cost, holdings, store.
  RankInfo info;
  info.store = cache().store_identity();
  if (hit.hit()) {
    id.key = hit.entry->graph_key;
    info.holds = true;
  } else {
    if (!tr) {
      tr = trace_checked(trace);
      id = cache().graph_id(*tr);
    }
    info.cost = static_cast<double>(tr->graph.size());
    info.needs = true;
    info.holds = cache().holds(id.key);
  }
  info.graph_key = id.key;
  rep.graph_key = id.key;
  std::vector<std::string> params;  // this rank's parameter names, placeholder order
  if (tr) params = cache::parameter_names(tr->graph);
  std::vector<RankInfo> infos;
  for (const auto& s : world.allgather(info.encode())) infos.push_back(RankInfo::decode(s));
  // 4. Plan (every rank computes the same one).
  const Plan plan = make_plan(infos);
  const int group = plan.group_of[static_cast<std::size_t>(me)];
  const int owner = group >= 0 ? plan.owner[static_cast<std::size_t>(group)] : -1;
  rep.owner = owner;
  // 5. Owners produce the artifact; failures are agreed.
  std::string bytes, status = "ok";
  if (owner == me) {
    try {
      if (info.holds) {
        bytes = cache().object_bytes(id.key);
        rep.read_store = true;
      } else {
        auto mine = compile_timed(std::move(*tr), args, compile);
        bytes = compiler::serialize_compiled(*mine, true);
      }
    } catch (const std::exception& e) {
      status = e.what();
    }
  }
  const auto statuses = world.allgather(status);
  for (int r = 0; r < world.size(); ++r)
    if (statuses[static_cast<std::size_t>(r)] != "ok")
      throw CommError("rank " + std::to_string(r) + " failed to compile " + cache().method() + ": " +
                      statuses[static_cast<std::size_t>(r)]);
  // 5b. Exchange within each key group: the owner broadcasts its bytes.
  const bool in_exchange = group >= 0 && (infos[static_cast<std::size_t>(me)].needs || owner == me);
  double t = now();
  mpi::Comm gc = world.split(in_exchange ? group : -1, owner == me ? 0 : me + 1);
  if (gc.valid() && gc.size() > 1) {
    gc.broadcast(bytes, 0);
    if (owner != me) {
      rep.fetched = true;
      rep.bytes_received = bytes.size();
    }
  }
  rep.exchange_s = now() - t;
  rep.artifact_bytes = bytes.size();
  if (!bytes.empty()) rep.artifact_checksum = cache::checksum(bytes);
  // The rank's compiled graph: its own hit, or the group's bytes bound to
  // its own parameter names.
  std::shared_ptr<compiler::CompiledGraph> g = hit.graph;
  if (!g) {
    cache::ObjectRecord obj;
    obj.graph_key = id.key;
    obj.raw = bytes;
    bool has_program = false;
    g = cache::load_object(obj, params, &has_program);
    g->trace.signature.bind(args);  // the cheap check of the call's inputs
  }
  // 6. Persist.
  t = now();
  persist_collectively(world, infos, plan, *g, id, bytes);
  rep.persist_s = now() - t;
  return g;
}

void CoordinatedSource::persist_collectively(const mpi::Comm& world, const std::vector<RankInfo>& infos,
                                             const Plan& plan, const compiler::CompiledGraph& g,
                                             const cache::GraphId& id, const std::string& bytes) {
  const int me = world.rank();
  const RankInfo& info = infos[static_cast<std::size_t>(me)];
  const mpi::Comm sc = world.split(plan.store_group[static_cast<std::size_t>(me)], me);
  cache::Bundle mine;
  if (info.needs) {
    // The owner's bytes: one artifact per key, byte-identical on every rank.
    cache::ObjectRecord o = cache().make_object(g, id, &bytes);
    cache::EntryRecord e = cache().make_entry(g, o);
    mine.entries.push_back(e);
    if (plan.ships_object[static_cast<std::size_t>(me)]) mine.objects.push_back(o);
    cache().remember(e, o);
  }
  const auto parts = sc.gather(mine.entries.empty() ? std::string() : cache::write_bundle(mine), 0);
  // The store's writer commits for every rank sharing it; a failure to
  // write (a full disk, a refused or read-only directory) is logged once and
  // the job continues uncached: it never leaves the other ranks waiting.
  std::string saved = "0";
  if (sc.rank() == 0) {
    try {
      cache::Bundle all;
      for (const auto& p : parts) {
        if (p.empty()) continue;
        cache::Bundle b = cache::read_bundle(p);
        for (auto& o : b.objects) all.objects.push_back(std::move(o));
        for (auto& e : b.entries) all.entries.push_back(std::move(e));
      }
      if (!all.entries.empty()) {
        cache().save(all.objects, all.entries);
        report().writer = true;
        log::info("Cache {} entries saved to {} by rank {}", all.entries.size(), cache().dir(), me);
      }
      saved = "1";
    } catch (const CacheError& e) {
      cache::warn_uncached(cache().dir(), "save",
                           "could not save to the cache " + cache().dir() + " (" + e.what() +
                               "); running uncached, the cache as it was is kept");
    }
  }
  sc.broadcast(saved, 0);
  report().saved = info.needs && saved == "1";
  world.barrier();
}

}  // namespace npucache::coord
