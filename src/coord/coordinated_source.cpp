#include "coord/coordinated_source.h"

#include <npucache/device.h>
#include <npucache/error.h>

#include "compiler/serialize.h"
#include "compiler/tuning_table.h"
#include "coord/agreement.h"
#include "coord/context.h"
#include "coord/hash.h"
#include "coord/host_allgather.h"
#include "coord/remote_plan.h"
#include "coord/reports.h"
#include "coord/routes.h"
#include "coord/transport.h"
#include "format/artifact.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "log/log.h"
#include "mpi/comm.h"
#include "process/context.h"
#include "process/once.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>

namespace npucache::coord {
namespace {

// Point-to-point tags on the coordinator's communicator (each uses tag and
// tag + 1, mpi::Comm::send_to).
constexpr int kExchangeTag = 100;
constexpr int kEntriesTag = 102;
constexpr int kSavedTag = 104;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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

}  // namespace

CoordinatedSource::CoordinatedSource(std::shared_ptr<cache::MethodCache> cache, const dist::CoordinatorOptions& options,
                                     ReportSink sink)
    : MethodSource(std::move(cache), std::move(sink)), options_(options) {}

void CoordinatedSource::load_profile(const FlatArgs& args, std::vector<DimMark>& dims) {
  MethodSource::load_profile(args, dims);
  // A slot per (input, dim) of the call's first kInputs inputs and their
  // first kDims dims, tensors then SymInts: a fixed size, so ranks whose
  // calls differ still meet in one all-reduce (the arrival names them).
  constexpr std::size_t kInputs = 64, kDims = 8;
  std::vector<std::string> paths;
  for (const auto& [path, t] : args.tensors) paths.push_back(path);
  for (const auto& [path, v] : args.symints) paths.push_back(path);
  std::vector<std::uint64_t> slots(kInputs * kDims, 0);
  for (const auto& m : dims) {
    const auto at = std::find(paths.begin(), paths.end(), m.input);
    const auto i = static_cast<std::size_t>(at - paths.begin());
    if (at != paths.end() && i < kInputs && m.dim >= 0 && static_cast<std::size_t>(m.dim) < kDims)
      slots[i * kDims + static_cast<std::size_t>(m.dim)] = 1;
  }
  transport(options_.timeout_s, nullptr)
      ->allreduce_max(slots, mpi::Step{"cache_compile of " + cache().method() + ": merging dynamic-shape profiles",
                                       options_.timeout_s});
  for (std::size_t i = 0; i < paths.size() && i < kInputs; ++i)
    for (std::size_t d = 0; d < kDims; ++d)
      if (slots[i * kDims + d]) {
        const DimMark m{paths[i], static_cast<int64_t>(d)};
        if (std::find(dims.begin(), dims.end(), m) == dims.end()) dims.push_back(m);
      }
}

std::shared_ptr<compiler::CompiledGraph> CoordinatedSource::obtain(const FlatArgs& args,
                                                                   const compiler::TraceStep& trace,
                                                                   const compiler::CompileStep& compile) {
  MethodReport& rep = report();
  dist::StepReport& steps = steps_;
  steps = {};
  steps.method = cache().method();
  steps.started_at = now();
  const std::shared_ptr<const Transport> net = transport(options_.timeout_s, &steps.setup_s);
  const Transport& comm = *net;
  const Hosts& hosts = Context::get(options_.timeout_s, nullptr).hosts();
  const int me = comm.rank();
  steps.hosts = hosts.count();
  auto step = [&](const std::string& what) {
    return mpi::Step{"cache_compile of " + cache().method() + ": " + what, options_.timeout_s};
  };
  Laps laps;
  // 1. Own entry, decided from this rank's trace (or, on the fast path,
  // from code_version without one).
  // A rank whose own work fails here still arrives, carrying the failure,
  // so the others learn it now instead of at the timeout (LocalFailure).
  std::optional<TraceResult> tr;
  cache::GraphId id;
  cache::MethodCache::Lookup hit;
  LocalFailure failure;
  try {
    if (!cache().fast_path()) {
      tr = trace_checked(trace);
      id = cache().graph_id(*tr);
    }
    hit = lookup(args, tr ? &*tr : nullptr, tr ? &id : nullptr, compile);
  } catch (...) {
    failure = LocalFailure::current(Phase::arrival);
  }
  laps.lap(&steps.lookup_s);
  // Arrival: one all-reduce says whether every rank calls this method,
  // whether every rank hit and whether any failed (max of the method's hash
  // and of its complement, max of "missed", max of "failed").
  const std::uint64_t mh = stable_hash(cache().method());
  std::vector<std::uint64_t> agreed{mh, ~mh, hit.hit() ? 0u : 1u, failure.flag()};
  comm.allreduce_max(agreed, step("arrival"));
  if (agreed[0] != ~agreed[1]) {
    const auto names = comm.allgather(cache().method(), step("arrival: naming the methods"));
    std::string who;
    for (std::size_t r = 0; r < names.size(); ++r)
      if (names[r] != cache().method())
        who += (who.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " '" + names[r] + "'";
    throw CommError("the ranks call different cached methods at the same point: this rank (" + std::to_string(me) +
                    ") calls '" + cache().method() + "', " + who +
                    ". Every rank must call dist::cache_compile methods in the same order");
  }
  agree_reduced(agreed[3], comm, failure, cache().method(), step("arrival"));
  laps.lap(&steps.arrival_s);
  if (agreed[2] == 0) {
    steps.all_hit = true;
    steps.ended_at = now();
    add_step_report(steps);
    return hit.graph;
  }
  // 2-3. Misses trace; everyone reports key, cost, holdings, store.
  RankInfo info;
  info.store = cache().store_identity();
  info.remote = cache().remote() != nullptr;
  if (hit.hit()) {
    id.key = hit.entry->graph_key;
    info.holds = true;
  } else {
    try {
      if (!tr) {  // the fast path traces only on a miss
        tr = trace_checked(trace);
        id = cache().graph_id(*tr);
      }
      info.cost = static_cast<double>(tr->graph.size());
      info.needs = true;
      info.holds = cache().holds(id.key);
    } catch (...) {
      failure = LocalFailure::current(Phase::plan);
      info.failure = failure.encode();
    }
  }
  info.graph_key = id.key;
  rep.graph_key = id.key;
  std::vector<std::string> params;  // this rank's parameter names, placeholder order
  if (tr) params = cache::parameter_names(tr->graph);
  laps.lap(&steps.lookup_s);
  std::vector<RankInfo> infos;
  for (const auto& s : host_allgather(comm, hosts, info.encode(), step("key all-gather"))) {
    steps.key_bytes += s.size();
    infos.push_back(RankInfo::decode(s));
  }
  {
    std::vector<std::string> failures;
    for (const auto& r : infos) failures.push_back(r.failure);
    decide(failures, failure, me, cache().method());
  }
  laps.lap(&steps.keys_s);
  // 4. Plan (every rank computes the same one).
  const Plan plan = make_plan(infos);
  const int group = plan.group_of[static_cast<std::size_t>(me)];
  int owner = group >= 0 ? plan.owner[static_cast<std::size_t>(group)] : -1;
  laps.lap(&steps.plan_s);
  // 4b. The remote tier: keys no store holds are read from it once per
  // host, before anyone compiles; one all-reduce says which reads worked.
  std::string bytes;
  bool from_remote = false;      // this rank's group is served by the remote, on every host
  bool nobody_produces = false;  // every group is: no owner can fail, no status to agree on
  const RemoteFetch remote = plan_remote(plan, infos, hosts.host_of);
  const auto with_remote = std::count_if(infos.begin(), infos.end(), [](const RankInfo& r) { return r.remote; });
  if (info.remote && with_remote < static_cast<std::ptrdiff_t>(infos.size()) &&
      process::Context::current().get<process::Once>().first("remote on some ranks"))
    log::warn(
        "the remote cache tier is set on {} of {} ranks; a job uses it only when every rank has it (set "
        "NPUCACHE_REMOTE or --remote alike on every rank)",
        with_remote, infos.size());
  if (!remote.groups.empty()) {
    const auto& mine = group >= 0 ? remote.fetchers.find(group) : remote.fetchers.end();
    const bool fetcher =
        mine != remote.fetchers.end() && std::find(mine->second.begin(), mine->second.end(), me) != mine->second.end();
    bool got = false;
    if (fetcher)
      if (auto rec = cache().remote_record(id.key)) {
        bytes = std::move(rec->raw);
        got = true;
        rep.remote = true;
        rep.read_store = true;  // served by a cache (the remote tier), not compiled
        rep.remote_bytes = bytes.size();
      }
    // Per remote group: whether a fetcher failed, and W - the lowest fetcher that read it.
    const std::size_t world = infos.size();
    std::vector<std::uint64_t> outcome(2 * remote.groups.size(), 0);
    for (std::size_t k = 0; k < remote.groups.size(); ++k)
      if (fetcher && remote.groups[k] == group) {
        outcome[2 * k] = got ? 0 : 1;
        outcome[2 * k + 1] = got ? world - static_cast<std::size_t>(me) : 0;
      }
    comm.allreduce_max(outcome, step("remote reads"));
    nobody_produces = remote.groups.size() == plan.keys.size();
    for (std::size_t k = 0; k < remote.groups.size(); ++k) nobody_produces = nobody_produces && outcome[2 * k] == 0;
    for (std::size_t k = 0; k < remote.groups.size(); ++k) {
      if (remote.groups[k] != group) continue;
      if (outcome[2 * k] == 0) {
        from_remote = true;  // every host read it
      } else if (outcome[2 * k + 1] > 0) {
        owner = static_cast<int>(world - outcome[2 * k + 1]);  // a host that read it shares it
        if (owner != me) {
          bytes.clear();
          rep.remote = rep.read_store = false;  // it receives the owner's copy
        }
      } else {
        bytes.clear();  // nobody could: the owner compiles
      }
    }
    laps.lap(&steps.remote_s);
  }
  rep.owner = from_remote ? -1 : owner;
  // 5. Owners produce the artifact; failures are agreed (one all-reduce;
  // the messages only when some owner failed).
  LocalFailure produced;
  if (owner == me && !from_remote && bytes.empty()) {
    try {
      if (info.holds) {
        bytes = cache().object_bytes(id.key);
        rep.read_store = true;
      } else {
        auto mine = compile_timed(std::move(*tr), args, compile);
        bytes = compiler::serialize_compiled(*mine, true);
        // The rank that compiled writes the artifact back, before any
        // entry naming it is written (persist, below).
        cache().push_remote({cache().make_object(*mine, id, bytes, true)}, {});
      }
    } catch (...) {
      produced = LocalFailure::current(Phase::compile);
    }
  }
  laps.lap(&steps.produce_s);
  if (!nobody_produces) agree(comm, produced, cache().method(), step("status"));
  laps.lap(&steps.status_s);
  // 5b. Exchange within each key group, along its routes.
  if (group >= 0) {
    std::vector<int> receivers;
    for (std::size_t r = 0; r < infos.size(); ++r)
      if (plan.group_of[r] == group && infos[r].needs && (from_remote || static_cast<int>(r) != owner))
        receivers.push_back(static_cast<int>(r));
    const auto routes = from_remote              ? host_routes(remote.fetchers.at(group), receivers, hosts.host_of)
                        : options_.flat_exchange ? flat_routes(owner, receivers)
                                                 : node_leader_routes(owner, receivers, hosts.host_of);
    if (auto it = routes.find(me); it != routes.end()) {
      const Route& route = it->second;
      if (route.parent >= 0) {
        bytes = comm.recv_from({route.parent}, kExchangeTag, step("exchange"))[0];
        rep.fetched = true;
        rep.bytes_received = bytes.size();
        const auto host = [&](int r) { return hosts.host_of[static_cast<std::size_t>(r)]; };
        if (host(route.parent) != host(me)) steps.bytes_between_hosts = bytes.size();
        if (host(owner) != host(me)) steps.flat_bytes_between_hosts = bytes.size();
      }
      comm.send_to(route.children, kExchangeTag, bytes, step("exchange"));
    }
  }
  laps.lap(&steps.exchange_s);
  rep.exchange_s = steps.exchange_s;
  rep.artifact_bytes = bytes.size();
  if (!bytes.empty()) rep.artifact_checksum = cache::checksum(bytes);
  // The rank's compiled graph: its own hit, or the group's bytes bound to
  // its own parameter names.
  // Bytes read from a store may hold the optimized graph without its
  // program (a cache written without ge_cache): the rank lowers it with the
  // stored autotune decisions, as a single-process hit does.
  std::shared_ptr<compiler::CompiledGraph> g = hit.graph;
  bool has_program = true;
  if (!g) {
    cache::ObjectRecord obj;
    obj.graph_key = id.key;
    obj.raw = bytes;
    cache::Decoded d = cache::decode(obj, params);
    has_program = d.has_program;
    g = cache().prepare(std::move(d), args, compile);
  }
  laps.lap(&steps.load_s);
  // 6. Persist.
  persist_collectively(comm, infos, plan, *g, id, bytes, has_program);
  laps.lap(&steps.persist_s);
  rep.persist_s = steps.persist_s;
  steps.ended_at = now();
  add_step_report(steps);
  return g;
}

void CoordinatedSource::persist_collectively(const Transport& comm, const std::vector<RankInfo>& infos,
                                             const Plan& plan, const compiler::CompiledGraph& g,
                                             const cache::GraphId& id, const std::string& bytes,
                                             bool bytes_have_program) {
  const int me = comm.rank();
  const RankInfo& info = infos[static_cast<std::size_t>(me)];
  const int store = plan.store_group[static_cast<std::size_t>(me)];
  const int writer = plan.store_writer[static_cast<std::size_t>(store)];
  auto step = [&](const std::string& what) {
    return mpi::Step{"cache_compile of " + cache().method() + ": persist (" + what + ")", options_.timeout_s};
  };
  // The ranks of this store with a new entry, other than its writer.
  std::vector<int> senders;
  for (std::size_t r = 0; r < infos.size(); ++r)
    if (plan.store_group[r] == store && infos[r].needs && static_cast<int>(r) != writer)
      senders.push_back(static_cast<int>(r));
  cache::Bundle mine;
  if (info.needs) {
    // The owner's bytes: one artifact per key, byte-identical on every rank.
    cache::ObjectRecord o = cache().make_object(g, id, bytes, bytes_have_program);
    cache::EntryRecord e = cache().make_entry(g, o);
    mine.entries.push_back(e);
    if (plan.ships_object[static_cast<std::size_t>(me)]) mine.objects.push_back(o);
    cache().remember(e, o);
  }
  if (me != writer) {
    if (!info.needs) return;
    comm.send_to({writer}, kEntriesTag, cache::write_bundle(mine), step("sending the entry to the store's writer"));
    const std::string saved =
        comm.recv_from({writer}, kSavedTag, step("waiting for the store's writer, rank " + std::to_string(writer)))[0];
    report().saved = saved == "1";
    return;
  }
  if (senders.empty() && !info.needs) return;  // nothing new for this store
  const auto parts = comm.recv_from(senders, kEntriesTag, step("gathering the store's entries"));
  // The store's writer commits for every rank sharing it; a failure to
  // write (a full disk, a refused or read-only directory) is logged once and
  // the job continues uncached: it never leaves the other ranks waiting.
  std::string saved = "0";
  try {
    cache::Bundle all = std::move(mine);
    for (const auto& p : parts) {
      cache::Bundle b = cache::read_bundle(p);
      for (auto& o : b.objects) all.objects.push_back(std::move(o));
      for (auto& e : b.entries) all.entries.push_back(std::move(e));
    }
    if (!all.entries.empty()) {
      const double t = now();
      cache().save({all.objects, all.entries});
      cache().push_remote({}, all.entries);  // index records, after their objects
      steps_.save_s = now() - t;
      report().writer = true;
      steps_.entries_written = static_cast<int>(all.entries.size());
      log::info("Cache {} entries of {} saved to {} by rank {}, the writer of that store", all.entries.size(),
                cache().method(), cache().dir(), me);
    }
    saved = "1";
  } catch (const CacheError& e) {
    cache::warn_uncached(cache().dir(), "save",
                         "could not save to the cache " + cache().dir() + " (" + e.what() +
                             "); running uncached, the cache as it was is kept");
  }
  comm.send_to(senders, kSavedTag, saved, step("telling the store's ranks"));
  report().saved = info.needs && saved == "1";
}

}  // namespace npucache::coord
