#include "coord/coordinated_source.h"

#include <npucache/error.h>

#include "compiler/serialize.h"
#include "coord/hash.h"
#include "coord/host_allgather.h"
#include "coord/job_progress.h"
#include "coord/region_plan.h"
#include "coord/reports.h"
#include "coord/routes.h"
#include "format/artifact.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "log/log.h"
#include "process/context.h"
#include "process/once.h"

#include <algorithm>
#include <set>

namespace npucache::coord {
namespace {

// Point-to-point tags on the coordinator's communicator (each uses tag and
// tag + 1, mpi::Comm::send_to).
constexpr int kExchangeTag = 100;
constexpr int kEntriesTag = 102;
constexpr int kSavedTag = 104;
constexpr int kRegionsTag = 106;

// The program as it travels: a bundle of one object record.
std::string wire_of(cache::ObjectRecord o) {
  cache::Bundle b;
  b.objects.push_back(std::move(o));
  return cache::write_bundle(b);
}

// The one object of a bundle, for the graph `key`, its bytes checked.
cache::ObjectRecord object_of(const std::string& wire, const std::string& key) {
  cache::Bundle b = cache::read_bundle(wire);
  if (b.objects.size() != 1 || b.objects[0].graph_key != key)
    throw CacheError("the program received is not the one object of graph " + key);
  cache::ObjectRecord& o = b.objects[0];
  if (o.raw.size() != o.meta.raw_size || cache::checksum(o.raw) != o.meta.checksum)
    throw CacheError("the program received for graph " + key + " fails its checksum");
  return std::move(o);
}

}  // namespace

CoordinatedSource::CoordinatedSource(std::shared_ptr<cache::MethodCache> cache, const dist::CoordinatorOptions& options,
                                     ReportSink sink)
    : MethodSource(std::move(cache), std::move(sink)), options_(options) {}

namespace {

// A dry run's piece of a method with graph breaks: reached only when the
// method itself was not predicted first; ends the call as the method's
// prediction does, compiling and writing nothing.
class DryRunPiece final : public compiler::EntrySource {
 public:
  explicit DryRunPiece(std::string method) : method_(std::move(method)) {}
  compiler::FirstEntry first_call(const FlatArgs&, const compiler::TraceStep&, const compiler::CompileStep&) override {
    throw dist::DryRunEnd("dry run of " + method_ + ": a piece of a method with graph breaks is not compiled");
  }
  void recompiled(const TraceResult&, const std::string&) override {}

 private:
  std::string method_;
};

}  // namespace

std::shared_ptr<compiler::EntrySource> CoordinatedSource::piece_source(const std::string& piece_method) {
  if (options_.dry_run) return std::make_shared<DryRunPiece>(piece_method);
  return MethodSource::piece_source(piece_method);
}

mpi::Step CoordinatedSource::step(const std::string& what) {
  return mpi::Step{"cache_compile of " + cache().method() + ": " + what, options_.timeout_s};
}

void CoordinatedSource::settle(const Agreed& a, Call& c) {
  if (!a.survivable) return;
  c.uncached = true;
  disabled_ = true;
  const std::string w = a.warning(cache().method());
  uncached_why_ = w;
  if (process::Context::current().get<process::Once>().first("coordinator uncached|" + w)) log::warn("{}", w);
}

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
  transport(options_.timeout_s, nullptr)->allreduce_max(slots, step("merging dynamic-shape profiles"));
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
  steps_ = {};
  steps_.method = cache().method();
  steps_.started_at = now();
  const std::shared_ptr<const Transport> net = transport(options_.timeout_s, &steps_.setup_s);
  Call c(args, trace, compile, *net);
  if (arrive(c)) {
    // Every rank is here (the arrival agreed that some rank misses): the
    // map of hosts is made collectively on the first such call.
    c.hosts = &Context::get(options_.timeout_s, nullptr).hosts(options_.timeout_s, nullptr);
    steps_.hosts = c.hosts->count();
    c.laps.lap(&steps_.setup_s);
    plan(c);
    if (options_.dry_run) predict(c);
    produce(c);
    load(c, exchange(c));
    persist(c);
  }
  if (options_.dry_run) predict(c);
  if (!c.hosts) {  // every rank hit: the map of hosts is not needed, and known only if made before
    const Hosts* known = Context::get(options_.timeout_s, nullptr).hosts_if_made();
    steps_.hosts = known ? known->count() : 0;
  }
  steps_.ended_at = now();
  add_step_report(steps_);
  if (c.me == 0) summarise(c);
  return c.g;
}

// The dry run's end: the plan made (the remote reads as its check), the
// report says what this rank would do, as a real run's would after it:
// hit (load its entry), read_store (the owner reads its store's object),
// remote (a host's fetcher reads the remote tier), fetched (receives from
// `owner`, or within its host from the fetcher when owner is -1),
// compiled (the owner compiles; `reason` then also names the nearest
// stored entry of the method and what differs, or "nearest unknown" when
// the search failed). When the ranks agreed to run the method uncached (a
// rank's cache cannot be used, judged as the real run judges it), the
// outcomes are the same, nothing would be stored and `reason` is
// "uncached: " and the warning. Nothing runs after: DryRunEnd always.
void CoordinatedSource::predict(Call& c) {
  MethodReport& rep = report();
  if (c.hosts && c.group >= 0) {
    const bool needs = c.info.needs;
    if (c.from_remote) {
      if (needs && !rep.remote) rep.fetched = true;
    } else if (c.owner == c.me) {
      if (!rep.remote) {
        if (c.info.holds)
          rep.read_store = true;
        else
          rep.compiled = true;
      }
    } else if (needs) {
      rep.fetched = true;
    }
    if (rep.compiled && !c.uncached) {
      // After the last collective: nothing here may end this rank alone.
      try {
        const cache::MethodCache::Neighbour n = cache().nearest_of_method(c.id.key);
        if (n.path.empty()) {
          rep.reason += "; the cache holds no entry of " + cache().method();
        } else {
          std::string diffs;
          for (const auto& d : n.differences) diffs += (diffs.empty() ? "" : "; ") + d;
          rep.reason += "; nearest entry " + n.path + (diffs.empty() ? "" : " (" + diffs + ")");
        }
      } catch (const std::exception& e) {
        rep.reason += std::string("; nearest unknown: ") + e.what();
      } catch (...) {
        rep.reason += "; nearest unknown: an unknown error";
      }
    }
  }
  if (c.uncached) rep.reason = "uncached: " + uncached_why_;
  steps_.ended_at = now();
  add_step_report(steps_);
  add_report(rep);
  throw dist::DryRunEnd("dry run of " + cache().method() + ": predicted, nothing compiled or written");
}

std::vector<Outcome> CoordinatedSource::outcome_per_host(const Call& c, const Hosts* hosts) const {
  const int world = c.net.size();
  std::vector<Outcome> per_host;
  if (steps_.all_hit) {
    per_host.assign(hosts ? hosts->names.size() : 1, Outcome{});
    for (int r = 0; r < world; ++r)
      ++per_host[hosts ? static_cast<std::size_t>(hosts->host_of[static_cast<std::size_t>(r)]) : 0].loaded;
  } else if (!c.plan.group_of.empty()) {
    per_host =
        outcomes(c.plan, c.infos, c.source, hosts ? hosts->host_of : std::vector<int>{}, hosts ? hosts->count() : 1);
  } else {
    per_host = {Outcome{0, 0, 0}};
  }
  return per_host;
}

// Rank 0's line for the method, and its progress line (job_progress.h),
// from what the call holds: no message is added.
void CoordinatedSource::summarise(const Call& c) {
  const Hosts* hosts = c.hosts ? c.hosts : Context::get(options_.timeout_s, nullptr).hosts_if_made();
  const std::vector<Outcome> per_host = outcome_per_host(c, hosts);
  Outcome all;
  for (const auto& o : per_host) all += o;
  if (c.net.size() > 1) {  // a job of one rank said it in its own entry lines (MethodIdentity::summarised)
    if (c.uncached)
      log::info("Cache {}: {} rank-methods ran uncached (a warning says why); cache {}", cache().method(), c.net.size(),
                cache().dir());
    else
      log::info("Cache {}: {} rank-methods loaded, {} compiled, {} received from another rank or the remote; cache {}",
                cache().method(), all.loaded, all.compiled, all.received, cache().dir());
  }
  JobProgress& progress = JobProgress::get();
  if (!progress.enabled()) return;
  progress.finished(cache().method(), c.net.size(), per_host, hosts ? hosts->names : std::vector<std::string>{},
                    c.uncached, steps_.ended_at - steps_.started_at);
}

// Arrival: each rank decides its own entry from its trace (or, on the fast
// path, from code_version without one); one all-reduce says whether every
// rank calls this method (max of the method's hash and of its complement),
// whether every rank hit (max of "missed") and whether any failed (max of
// the failure flags). A rank whose own work failed still arrives, carrying
// the failure.
bool CoordinatedSource::arrive(Call& c) {
  LocalFailure failure;
  try {
    c.net.local_work(Phase::arrival, cache().method());
    if (!cache().fast_path()) {
      c.tr = trace_checked(c.trace);
      c.id = graph_id_timed(*c.tr);
    }
    c.hit = lookup(c.args, c.tr ? &*c.tr : nullptr, c.tr ? &c.id : nullptr, c.compile);
    if (c.hit.reason == cache::MissReason::refused)
      failure = LocalFailure::survivable(Phase::arrival, "its cache " + cache().dir() + " is " + c.hit.reason_text());
  } catch (...) {
    failure = LocalFailure::current(Phase::arrival);
  }
  c.laps.lap(&steps_.lookup_s);
  const std::uint64_t mh = stable_hash(cache().method());
  std::vector<std::uint64_t> agreed{mh, ~mh, c.hit.hit() ? 0u : 1u, failure.flag()};
  c.net.allreduce_max(agreed, step("arrival"));
  if (agreed[0] != ~agreed[1]) {
    const auto names = c.net.allgather(cache().method(), step("arrival: naming the methods"));
    std::string who;
    for (std::size_t r = 0; r < names.size(); ++r)
      if (names[r] != cache().method())
        who += (who.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " '" + names[r] + "'";
    throw CommError("the ranks call different cached methods at the same point: this rank (" + std::to_string(c.me) +
                    ") calls '" + cache().method() + "', " + who +
                    ". Every rank must call dist::cache_compile methods in the same order");
  }
  settle(agree_reduced(agreed[3], c.net, failure, cache().method(), step("arrival")), c);
  c.laps.lap(&steps_.arrival_s);
  if (agreed[2] != 0) return true;
  steps_.all_hit = true;
  c.g = c.hit.graph;
  return false;
}

// Plan: ranks that miss trace (the fast path traces only now); every rank
// reports its key, cost, holdings and store in the host-by-host all-gather,
// which carries the failures too; every rank computes the same plan.
void CoordinatedSource::plan(Call& c) {
  MethodReport& rep = report();
  RankInfo& info = c.info;
  LocalFailure failure;
  try {
    c.net.local_work(Phase::plan, cache().method());
    if (!disabled_) {
      std::string unusable;
      info.store = cache().store_identity(&unusable);
      if (!unusable.empty()) {
        info.store.clear();
        failure = LocalFailure::survivable(Phase::plan, "its cache " + cache().dir() + " cannot be used: " + unusable);
      }
    }
    info.remote = cache().remote() != nullptr;
    if (c.hit.hit()) {
      c.id.key = c.hit.entry->graph_key;
      info.holds = true;
    } else {
      if (!c.tr) {
        c.tr = trace_checked(c.trace);
        c.id = graph_id_timed(*c.tr);
      }
      info.cost = static_cast<double>(c.tr->graph.size());
      info.needs = true;
      info.holds = !info.store.empty() && cache().holds(cache::MethodCache::Tier::local, c.id.key);
      // What a compile of it would compile: the region waves (region_plan.h).
      if (!info.holds && !info.store.empty() && !options_.dry_run && options_.region_waves)
        info.regions = cache().regions_missing(*c.tr);
    }
  } catch (...) {
    failure = LocalFailure::current(Phase::plan);
  }
  info.failure = failure.encode();
  info.graph_key = c.id.key;
  rep.graph_key = c.id.key;
  if (c.tr) c.params = cache::parameter_names(c.tr->graph);
  c.laps.lap(&steps_.lookup_s);
  std::vector<std::string> failures;
  for (const auto& s : host_allgather(c.net, *c.hosts, info.encode(), step("key all-gather"))) {
    steps_.key_bytes += s.size();
    c.infos.push_back(RankInfo::decode(s));
    failures.push_back(c.infos.back().failure);
  }
  settle(decide(failures, failure, c.me, cache().method()), c);
  c.laps.lap(&steps_.keys_s);
  c.plan = make_plan(c.infos);
  c.group = c.plan.group_of[static_cast<std::size_t>(c.me)];
  c.owner = c.group >= 0 ? c.plan.owner[static_cast<std::size_t>(c.group)] : -1;
  c.source = c.plan.owner;
  c.read_remotely.assign(c.plan.keys.size(), false);
  c.laps.lap(&steps_.plan_s);
  read_remote(c);
  rep.owner = c.from_remote ? -1 : c.owner;
  if (c.me == 0 && !options_.dry_run && JobProgress::get().enabled()) {
    std::set<int> owners;
    int subgraphs = 0;
    for (int src : c.source)
      if (src >= 0 && !c.infos[static_cast<std::size_t>(src)].holds) {
        ++subgraphs;
        owners.insert(src);
      }
    if (subgraphs > 0)
      JobProgress::get().compiling(cache().method(), subgraphs, static_cast<int>(owners.size()), c.net.size());
  }
}

// The remote tier: keys no store holds are read from it once per host,
// before anyone compiles; one all-reduce says which reads worked.
void CoordinatedSource::read_remote(Call& c) {
  MethodReport& rep = report();
  c.remote = plan_remote(c.plan, c.infos, c.hosts->host_of);
  const auto with_remote = std::count_if(c.infos.begin(), c.infos.end(), [](const RankInfo& r) { return r.remote; });
  if (c.info.remote && with_remote < static_cast<std::ptrdiff_t>(c.infos.size()) &&
      process::Context::current().get<process::Once>().first("remote on some ranks"))
    log::warn(
        "the remote cache tier is set on {} of {} ranks; a job uses it only when every rank has it (set "
        "NPUCACHE_REMOTE or --remote alike on every rank)",
        with_remote, c.infos.size());
  if (c.remote.groups.empty()) return;
  const auto& mine = c.group >= 0 ? c.remote.fetchers.find(c.group) : c.remote.fetchers.end();
  const bool fetcher = mine != c.remote.fetchers.end() &&
                       std::find(mine->second.begin(), mine->second.end(), c.me) != mine->second.end();
  bool got = false;
  if (fetcher)
    if (auto rec = cache().record(cache::MethodCache::Tier::remote, c.id.key)) {
      rep.remote = true;
      rep.read_store = true;  // served by a cache (the remote tier), not compiled
      rep.remote_bytes = rec->raw.size();
      c.wire = wire_of(std::move(*rec));
      got = true;
    }
  // Per remote group: whether a fetcher failed, and W - the lowest fetcher that read it.
  const std::size_t world = c.infos.size();
  std::vector<std::uint64_t> outcome(2 * c.remote.groups.size(), 0);
  for (std::size_t k = 0; k < c.remote.groups.size(); ++k)
    if (fetcher && c.remote.groups[k] == c.group) {
      outcome[2 * k] = got ? 0 : 1;
      outcome[2 * k + 1] = got ? world - static_cast<std::size_t>(c.me) : 0;
    }
  c.net.allreduce_max(outcome, step("remote reads"));
  c.nobody_produces = c.remote.groups.size() == c.plan.keys.size();
  for (std::size_t k = 0; k < c.remote.groups.size(); ++k) c.nobody_produces = c.nobody_produces && outcome[2 * k] == 0;
  for (std::size_t k = 0; k < c.remote.groups.size(); ++k) {
    const auto g = static_cast<std::size_t>(c.remote.groups[k]);
    if (outcome[2 * k] == 0)
      c.source[g] = -1;
    else if (outcome[2 * k + 1] > 0)
      c.source[g] = static_cast<int>(world - outcome[2 * k + 1]);
    c.read_remotely[g] = outcome[2 * k] == 0 || outcome[2 * k + 1] > 0;
    if (c.remote.groups[k] != c.group) continue;
    if (outcome[2 * k] == 0) {
      c.from_remote = true;  // every host read it
    } else if (outcome[2 * k + 1] > 0) {
      c.owner = static_cast<int>(world - outcome[2 * k + 1]);  // a host that read it shares it
      if (c.owner != c.me) {
        c.wire.clear();
        rep.remote = rep.read_store = false;  // it receives the owner's copy
      }
    } else {
      c.wire.clear();  // nobody could: the owner compiles
    }
  }
  c.laps.lap(&steps_.remote_s);
}

// Compile: owners compile or read the program, as the object record every
// rank of the group will run and store (its producer is the owner).
void CoordinatedSource::produce(Call& c) {
  if (c.nobody_produces) {  // the remote tier served every group: no owner can fail
    c.laps.lap(&steps_.produce_s);
    return;
  }
  // The owners compiling, and the region waves over their stores.
  std::vector<bool> compiling(c.infos.size(), false);
  for (std::size_t g = 0; g < c.source.size(); ++g) {
    const int src = c.source[g];
    if (src >= 0 && !c.read_remotely[g] && !c.infos[static_cast<std::size_t>(src)].holds)
      compiling[static_cast<std::size_t>(src)] = true;
  }
  // Uncached (agreed), nothing is stored: no wave.
  const RegionPlan waves = c.uncached ? RegionPlan{} : make_region_plan(c.infos, c.plan, compiling);
  const bool second = !waves.empty() && waves.second_wave[static_cast<std::size_t>(c.me)];
  LocalFailure failure;
  const auto compile = [&] {
    try {
      c.net.local_work(Phase::compile, cache().method());
      if (c.owner == c.me && !c.from_remote && c.wire.empty()) c.wire = wire_of(owned_object(c));
    } catch (...) {
      failure = LocalFailure::current(Phase::compile);
    }
  };
  if (!second) compile();
  if (!waves.empty()) {
    c.laps.lap(&steps_.produce_s);
    settle(agree(c.net, failure, cache().method(), step("status (the regions' first wave)")), c);
    c.laps.lap(&steps_.status_s);
    exchange_regions(c, waves);
    if (second) compile();
  }
  c.laps.lap(&steps_.produce_s);
  settle(agree(c.net, failure, cache().method(), step("status")), c);
  c.laps.lap(&steps_.status_s);
}

void CoordinatedSource::exchange_regions(Call& c, const RegionPlan& waves) {
  for (const auto& t : waves.transfers) {
    if (t.from == c.me) {
      // "" when its compile stored none (failed, or its store refused it):
      // the receivers' compiles compile it.
      c.net.send_to(t.to, kRegionsTag, cache().region_file(t.region), step("sending compiled region " + t.region));
    } else if (std::find(t.to.begin(), t.to.end(), c.me) != t.to.end()) {
      const std::string bytes =
          c.net.recv_from({t.from}, kRegionsTag,
                          step("receiving compiled region " + t.region + " from rank " + std::to_string(t.from)))[0];
      if (!bytes.empty() && cache().store_region_file(t.region, bytes)) ++report().regions_copied;
    }
  }
}

cache::ObjectRecord CoordinatedSource::owned_object(Call& c) {
  if (c.info.holds) {  // its store has it: a read, no compile
    if (auto o = cache().record(cache::MethodCache::Tier::local, c.id.key)) {
      report().read_store = true;
      c.shipped_checksum = o->meta.checksum;
      return std::move(*o);
    }
    if (!c.tr)
      throw CacheError("the object " + c.id.key + " of " + cache().method() + " left the cache " + cache().dir() +
                       " since the plan (removed or damaged)");
    log::warn("the object {} of {} left the cache {} since the plan (removed or damaged); compiling it", c.id.key,
              cache().method(), cache().dir());
  }
  auto mine = compile_timed(std::move(*c.tr), c.args, c.compile);
  c.compiled_here = true;
  // What it tuned, for every later compile of the kernels (another layout's
  // stage programs): this rank may not be its store's writer, whose commit
  // saves the tuning table.
  if (!disabled_ && mine->kernels_tuned > 0) cache().save_tuning();
  cache::ObjectRecord o = cache().make_object(*mine, c.id, compiler::serialize_compiled(*mine, true), true);
  // The rank that compiled writes the program back, before any entry
  // naming it is written (persist, below).
  cache().push_remote({o}, {});
  return o;
}

// Exchange: the program travels within each key group, along its routes.
// A rank whose own work fails here still passes the bytes on, so no rank
// waits for it; its failure is agreed with the load's.
LocalFailure CoordinatedSource::exchange(Call& c) {
  MethodReport& rep = report();
  LocalFailure failure;
  try {
    c.net.local_work(Phase::exchange, cache().method());
  } catch (...) {
    failure = LocalFailure::current(Phase::exchange);
  }
  if (c.group >= 0) {
    std::vector<int> receivers;
    for (std::size_t r = 0; r < c.infos.size(); ++r)
      if (c.plan.group_of[r] == c.group && c.infos[r].needs && (c.from_remote || static_cast<int>(r) != c.owner))
        receivers.push_back(static_cast<int>(r));
    const auto routes = c.from_remote ? host_routes(c.remote.fetchers.at(c.group), receivers, c.hosts->host_of)
                        : options_.flat_exchange ? flat_routes(c.owner, receivers)
                                                 : node_leader_routes(c.owner, receivers, c.hosts->host_of);
    if (auto it = routes.find(c.me); it != routes.end()) {
      const Route& route = it->second;
      if (route.parent >= 0) {
        c.wire = c.net.recv_from({route.parent}, kExchangeTag, step("exchange"))[0];
        rep.fetched = true;
        rep.bytes_received = c.wire.size();
        const auto host = [&](int r) { return c.hosts->host_of[static_cast<std::size_t>(r)]; };
        if (host(route.parent) != host(c.me)) steps_.bytes_between_hosts = c.wire.size();
        if (host(c.owner) != host(c.me)) steps_.flat_bytes_between_hosts = c.wire.size();
      }
      c.net.send_to(route.children, kExchangeTag, c.wire, step("exchange"));
    }
  }
  c.laps.lap(&steps_.exchange_s);
  rep.exchange_s = steps_.exchange_s;
  return failure;
}

// Load: each rank that missed prepares the program it received for its own
// call (bound to its own parameter names; bytes without a program, read
// from a store written without ge_cache, are lowered with the stored
// autotune decisions, as a single-process hit does); a rank that hit runs
// its own. Then the ranks agree on the exchange's and the load's failures.
void CoordinatedSource::load(Call& c, LocalFailure failure) {
  MethodReport& rep = report();
  try {
    c.net.local_work(Phase::load, cache().method());
    if (c.hit.hit()) {
      c.g = c.hit.graph;
    } else {
      c.object = object_of(c.wire, c.id.key);
      rep.artifact_bytes = c.object.raw.size();
      rep.artifact_checksum = c.object.meta.checksum;
      served_compile_s_ = c.object.meta.compile_time_s;
      c.g = cache().prepare(cache::decode(c.object, c.params), c.args, c.compile);
    }
  } catch (...) {
    if (!failure.failed()) failure = LocalFailure::current(Phase::load);
  }
  settle(agree(c.net, failure, cache().method(), step("load")), c);
  c.laps.lap(&steps_.load_s);
}

LocalFailure CoordinatedSource::run_kept(Call& c, const std::string& wire) {
  try {
    cache::ObjectRecord kept = object_of(wire, c.id.key);
    c.g = cache().runnable(kept, cache::parameter_names(c.g->trace.graph), c.args, c.compile);
    report().artifact_checksum = kept.meta.checksum;
    report().artifact_bytes = kept.raw.size();
    cache().remember(cache().make_entry(*c.g, kept), kept);
    c.object = std::move(kept);
    c.kept_other = true;
    return {};
  } catch (...) {
    return LocalFailure::current(Phase::persist);
  }
}

// Persist: one writer per store (its lowest rank) commits the new entries
// (and the objects its store lacks) of every rank sharing it; the others
// send it theirs -- or nothing, when their own work failed, so the writer
// never waits for them -- and wait for its answer, which carries the
// object the store kept when another writer had stored the key first:
// they run those bytes (every user of a key in a store runs the same
// program). Then the ranks agree: a save that failed is survivable.
void CoordinatedSource::persist(Call& c) {
  if (c.uncached) return;
  const std::vector<std::uint64_t> vouched = vouch_regions(c);
  const auto me = static_cast<std::size_t>(c.me);
  const int store = c.plan.store_group[me];
  LocalFailure failure;
  cache::Bundle mine;
  try {
    c.net.local_work(Phase::persist, cache().method());
    if (c.info.needs && store >= 0) {
      cache::EntryRecord e = cache().make_entry(*c.g, c.object);
      if (c.plan.ships_object[me]) mine.objects.push_back(c.object);
      cache().remember(e, c.object);
      mine.entries.push_back(std::move(e));
    }
  } catch (...) {
    failure = LocalFailure::current(Phase::persist, true);
    mine = {};
  }
  if (store >= 0) {
    const int writer = c.plan.store_writer[static_cast<std::size_t>(store)];
    if (c.me == writer) {
      std::vector<int> senders;
      for (std::size_t r = 0; r < c.infos.size(); ++r)
        if (c.plan.store_group[r] == store && c.infos[r].needs && static_cast<int>(r) != writer)
          senders.push_back(static_cast<int>(r));
      LocalFailure saving = commit_store(c, senders, std::move(mine));
      if (!failure.failed()) failure = std::move(saving);
    } else if (c.info.needs) {
      c.net.send_to({writer}, kEntriesTag, mine.entries.empty() ? std::string() : cache::write_bundle(mine),
                    step("persist (sending the entry to the store's writer)"));
      const std::string answer =
          c.net.recv_from({writer}, kSavedTag,
                          step("persist (waiting for the store's writer, rank " + std::to_string(writer) + ")"))[0];
      report().saved = !answer.empty() && answer[0] == '1';
      if (answer.size() > 1 && !failure.failed()) failure = run_kept(c, answer.substr(1));
    }
    // The rank that brought its group's program into this store also
    // brings its regions (cache/region_copies.h): a later job of another
    // layout on this store then compiles none. A program the remote tier
    // served (to every host, or to a fetcher that shared it) is trusted so
    // only when the remote is signed; one its owner read from its own store
    // only when that store vouched for its regions (vouch_regions).
    const auto g = static_cast<std::size_t>(c.group);
    const bool remotely = c.group >= 0 && c.read_remotely[g];
    // A program the store kept in its place (another writer's, run_kept)
    // was vouched for by nobody.
    const bool trusted = c.group >= 0 && !c.kept_other && (remotely ? cache().remote_signed() : vouched[g] == 0);
    if (c.plan.ships_object[me] && c.g && trusted && !failure.failed())
      report().regions_copied += cache().copy_regions(*c.g);
    else if (c.plan.ships_object[me] && c.g && !c.g->regions.empty() && !failure.failed() && !remotely)
      log::info(
          "the compiled regions of {} were not copied into {}: {}; a later compile there calling them compiles them",
          cache().method(), cache().dir(),
          c.kept_other ? "the store kept another writer's program, which nobody vouched for"
                       : "the store that served the program (rank " + std::to_string(c.owner) +
                             "'s) does not hold them as the program has them (a program it was served, not one it "
                             "compiled)");
  }
  settle(agree(c.net, failure, cache().method(), step("persist")), c);
  c.laps.lap(&steps_.persist_s);
  report().persist_s = steps_.persist_s;
}

// Whether the owners that read their group's program from their own store
// vouch for its regions, for the ranks that bring the program into another
// store: per group, 0 when its regions may be copied there. A store may
// hold a program whose regions it never took into regions/ (one an
// unsigned remote served: a claim, not this store's compile), so its
// object alone proves nothing; the owner vouches only when its regions/
// holds every region of the program with the same program and decisions
// (cache/region_copies.h, regions_held). One all-reduce, and only when a
// rank brings a program an owner read from its store; every rank decides
// that alike from the plan. A group compiled in this job is vouched for by
// its compile; a failed owner vouches for nothing. Only the owners of the
// groups brought so read their regions/.
std::vector<std::uint64_t> CoordinatedSource::vouch_regions(Call& c) {
  std::vector<std::uint64_t> out(c.plan.keys.size(), 0);
  std::vector<bool> brought(c.plan.keys.size(), false);  // per group: a program its owner read from its store
  for (std::size_t r = 0; r < c.infos.size(); ++r) {
    const int g = c.plan.group_of[r];
    if (!c.plan.ships_object[r] || g < 0 || c.read_remotely[static_cast<std::size_t>(g)]) continue;
    const int src = c.source[static_cast<std::size_t>(g)];
    if (src >= 0 && c.infos[static_cast<std::size_t>(src)].holds) brought[static_cast<std::size_t>(g)] = true;
  }
  if (std::none_of(brought.begin(), brought.end(), [](bool b) { return b; })) return out;
  const auto mine = static_cast<std::size_t>(c.group);
  if (c.group >= 0 && brought[mine] && c.owner == c.me && !c.compiled_here) {
    bool held = false;
    try {
      // A hit owner vouches for the graph it runs: only when the bytes it
      // sent are the object it hit (the key's file may have been replaced
      // since its lookup).
      const bool sent_what_it_runs = !c.hit.hit() || c.hit.object_checksum == c.shipped_checksum;
      held = c.g && sent_what_it_runs && cache().regions_held(*c.g);
    } catch (const std::exception& e) {
      log::debug("the regions of {} are not vouched for: {}", cache().method(), e.what());
    }
    out[mine] = held ? 0 : 1;
  }
  c.net.allreduce_max(out, step("persist (the owners' regions)"));
  return out;
}

// The writer's half of persist: whatever happens it answers every sender
// ("0": not saved; "1": saved, followed by the kept object's bundle when
// the store kept another writer's bytes for the sender's key).
LocalFailure CoordinatedSource::commit_store(Call& c, const std::vector<int>& senders, cache::Bundle mine) {
  const auto parts = c.net.recv_from(senders, kEntriesTag, step("persist (gathering the store's entries)"));
  std::vector<std::string> answers(senders.size(), "0");
  const bool own = !mine.entries.empty();  // this rank's own entry is in the commit
  std::string own_kept;                    // the kept object of its key, when another writer's
  LocalFailure failure;
  try {
    // Each sender's entry paths, and this rank's: saved only if the commit
    // kept them all (an entry whose stored object a sweep removed meanwhile
    // is left out, Store::commit).
    std::vector<std::vector<std::string>> paths(parts.size());
    std::vector<std::string> own_paths;
    for (const auto& e : mine.entries) own_paths.push_back(e.path);
    cache::Bundle all = std::move(mine);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].empty()) continue;  // a sender whose own work failed: the agreement names it
      cache::Bundle b = cache::read_bundle(parts[i]);
      for (auto& o : b.objects) all.objects.push_back(std::move(o));
      for (auto& e : b.entries) {
        paths[i].push_back(e.path);
        all.entries.push_back(std::move(e));
      }
    }
    if (!all.entries.empty()) {
      const double t = now();
      const std::size_t entries = all.entries.size();
      // The writer's own object as it read or compiled it: a sweep that
      // removed the store's copy since the plan found it (gc beside the
      // job) has it stored again, never the entries naming it left out.
      std::vector<cache::ObjectRecord> pinned;
      if (own && !c.object.raw.empty()) pinned.push_back(c.object);
      const cache::Store::Committed done =
          cache().save({std::move(all.objects), std::move(all.entries), std::move(pinned)});
      cache().push_remote({}, done.entries);  // index records, after their objects
      steps_.save_s = now() - t;
      report().writer = true;
      steps_.entries_written = static_cast<int>(entries);
      log::debug("Cache {} entries of {} saved to {} by rank {}, the writer of that store", entries, cache().method(),
                 cache().dir(), c.me);
      const auto kept = [&](const std::string& key) -> const cache::ObjectRecord* {
        if (!done.adopted.count(key)) return nullptr;
        const auto it = done.kept.find(key);
        return it == done.kept.end() ? nullptr : &it->second;
      };
      const std::set<std::string> left_out(done.unpinned.begin(), done.unpinned.end());
      const auto all_kept = [&](const std::vector<std::string>& ps) {
        return std::none_of(ps.begin(), ps.end(), [&](const std::string& p) { return left_out.count(p) > 0; });
      };
      for (std::size_t i = 0; i < senders.size(); ++i) {
        if (parts[i].empty() || !all_kept(paths[i])) continue;
        answers[i] = "1";
        if (const auto* k = kept(c.infos[static_cast<std::size_t>(senders[i])].graph_key)) answers[i] += wire_of(*k);
      }
      report().saved = own && all_kept(own_paths);
      if (const auto* k = own ? kept(c.id.key) : nullptr) own_kept = wire_of(*k);
    }
  } catch (...) {
    failure = LocalFailure::current(Phase::persist, true);
    report().saved = false;
    std::fill(answers.begin(), answers.end(), "0");
  }
  for (std::size_t i = 0; i < senders.size(); ++i)
    c.net.send_to({senders[i]}, kSavedTag, answers[i], step("persist (telling the store's ranks)"));
  if (!own_kept.empty() && !failure.failed()) failure = run_kept(c, own_kept);
  return failure;
}

}  // namespace npucache::coord
