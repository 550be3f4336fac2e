// The coordinated EntrySource behind dist::cache_compile (see
// include/npucache/dist.h for the protocol).
#include <npucache/dist.h>
#include <npucache/error.h>
#include <npucache/mpi.h>

#include "cache/artifact.h"
#include "cache/bundle.h"
#include "cache/cache_error.h"
#include "cache/context.h"
#include "cache/registry.h"
#include "cache/stats.h"
#include "compiler/compiled_graph.h"
#include "compiler/serialize.h"
#include "dist/mpi_ops.h"
#include "dist/plan.h"
#include "log/log.h"

#include <chrono>
#include <ctime>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace npucache::dist {
namespace {

std::mutex g_reports_mu;
std::vector<MethodReport> g_reports;

void add_report(const MethodReport& r) {
  std::lock_guard lock(g_reports_mu);
  g_reports.push_back(r);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of the calling thread (compiles, autotuning included, run on it).
double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Identifies a store: ranks on one host with the same directory share it.
std::string store_identity(const std::string& dir) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  struct stat st{};
  ::stat(dir.c_str(), &st);
  return std::string(host) + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

void refuse_rng(const TraceResult& t) {
  for (const Node& n : t.graph.nodes())
    if (op_info(n.op).rng)
      throw ConfigError("cache_compile cannot cache " + t.name + ": node '" + n.name + "' (" +
                        std::string(op_name(n.op)) + ") draws random numbers; nothing was written");
}

class CoordinatedSource final : public npucache::detail::EntrySource {
 public:
  CoordinatedSource(const nn::Module& module, const CacheOptions& o, const CoordinatorOptions& coord,
                    const CompilerConfig& config)
      : ctx_(cache::make_context(module, o, config, true)), coord_(coord) {
    std::filesystem::create_directories(ctx_.dir);
  }

  std::shared_ptr<compiler::CompiledGraph> load(const FlatArgs& args,
                                                const std::function<TraceResult()>& trace) override {
    MethodReport rep;
    rep.method = ctx_.method;
    const double t0 = now();
    auto g = coord_.independent ? independent(args, trace, rep) : coordinated(args, trace, rep);
    rep.total_s = now() - t0;
    add_report(rep);
    return g;
  }

  void compiled(const compiler::CompiledGraph&) override {}
  void recompiled(const std::string& name) override { log::warn("Skip cache as {} recompiled", name); }

 private:
  std::shared_ptr<compiler::CompiledGraph> compile(TraceResult tr, const FlatArgs& args, MethodReport& rep) {
    const double t = now(), c = thread_cpu();
    SymBindings b = tr.signature.bind(args);
    auto g = std::make_shared<compiler::CompiledGraph>(compiler::compile_graph(
        std::move(tr), ctx_.key_inputs.config, *ctx_.decompositions, b, ctx_.dynamic, ctx_.key_inputs.device));
    rep.compile_s = now() - t;
    rep.compile_cpu_s = thread_cpu() - c;
    rep.compiled = true;
    return g;
  }

  cache::EntryRecord entry_for(const compiler::CompiledGraph& g, const std::string& gk, const cache::ObjectRecord& o) {
    return cache::make_entry(g, ctx_.path, ctx_.key, gk, ctx_.who, o);
  }

  // Every rank on its own: the baseline.
  std::shared_ptr<compiler::CompiledGraph> independent(const FlatArgs& args, const std::function<TraceResult()>& trace,
                                                       MethodReport& rep) {
    cache::LocalLookup hit = cache::lookup_local(ctx_, args);
    if (hit.graph) {
      rep.hit = true;
      rep.graph_key = hit.entry->graph_key;
      return hit.graph;
    }
    double t = now();
    TraceResult tr = trace();
    rep.trace_s = now() - t;
    refuse_rng(tr);
    const std::string gk = cache::graph_key(tr.graph, ctx_.key_inputs);
    rep.graph_key = gk;
    rep.owner = ctx_.who.global_rank;
    auto g = compile(std::move(tr), args, rep);
    t = now();
    cache::ObjectRecord o = cache::make_object(*g, gk, true, ctx_.who);
    rep.artifact_bytes = o.raw.size();
    cache::Hdf5Store::Transaction tx;
    tx.objects.push_back(o);
    tx.entries.push_back(entry_for(*g, gk, o));
    cache::Hdf5Store(ctx_.dir).commit(tx);
    cache::record_save(ctx_.dir, {ctx_.path});
    rep.persist_s = now() - t;
    rep.writer = true;
    return g;
  }

  std::shared_ptr<compiler::CompiledGraph> coordinated(const FlatArgs& args, const std::function<TraceResult()>& trace,
                                                       MethodReport& rep) {
    const Comm world = Comm::world();
    const int me = world.rank();
    world.arrive(static_cast<int>(std::hash<std::string>{}(ctx_.method) & 0x3fffffff), coord_.timeout_s,
                 "cache_compile of " + ctx_.method);
    // 1. Own entry.
    cache::LocalLookup hit = cache::lookup_local(ctx_, args);
    std::string all_hit = world.allgather(hit.graph ? "1" : "0") == std::vector<std::string>(world.size(), "1") ? "1" : "0";
    if (all_hit == "1") {
      rep.hit = true;
      rep.graph_key = hit.entry->graph_key;
      return hit.graph;
    }
    // 2-3. Misses trace; everyone reports key, cost, holdings, store.
    std::optional<TraceResult> tr;
    RankInfo info;
    info.store = store_identity(ctx_.dir);
    if (hit.graph) {
      info.graph_key = hit.entry->graph_key;
      info.holds = true;
      rep.hit = true;
    } else {
      const double t = now();
      tr = trace();
      rep.trace_s = now() - t;
      refuse_rng(*tr);
      info.graph_key = cache::graph_key(tr->graph, ctx_.key_inputs);
      info.cost = static_cast<double>(tr->graph.size());
      info.needs = true;
      info.holds = cache::store_holds(ctx_, info.graph_key);
    }
    rep.graph_key = info.graph_key;
    std::vector<std::string> params;  // this rank's parameter names, placeholder order
    if (tr)
      for (const Node& n : tr->graph.nodes())
        if (n.op == Op::placeholder && n.kind != PlaceholderKind::input) params.push_back(n.target);
    std::vector<RankInfo> infos;
    for (const auto& s : world.allgather(info.encode())) infos.push_back(RankInfo::decode(s));
    // 4. Plan (every rank computes the same one).
    const Plan plan = make_plan(infos);
    const int group = plan.group_of[static_cast<std::size_t>(me)];
    const int owner = group >= 0 ? plan.owner[static_cast<std::size_t>(group)] : -1;
    rep.owner = owner;
    // 5. Owners produce the artifact; failures are agreed.
    std::string bytes, status = "ok";
    std::shared_ptr<compiler::CompiledGraph> mine;
    if (owner == me) {
      try {
        if (info.holds) {
          auto reader = cache::Hdf5Store(ctx_.dir).reader();
          bytes = reader->object(info.graph_key).raw;
          rep.read_store = true;
        } else {
          mine = compile(std::move(*tr), args, rep);
          bytes = compiler::serialize_compiled(*mine, true);
        }
      } catch (const std::exception& e) {
        status = e.what();
      }
    }
    const auto statuses = world.allgather(status);
    for (int r = 0; r < world.size(); ++r)
      if (statuses[static_cast<std::size_t>(r)] != "ok")
        throw CommError("rank " + std::to_string(r) + " failed to compile " + ctx_.method + ": " +
                        statuses[static_cast<std::size_t>(r)]);
    // 5b. Exchange within each key group: the owner broadcasts its bytes.
    const bool in_exchange = group >= 0 && (infos[static_cast<std::size_t>(me)].needs || owner == me);
    double t = now();
    Comm gc = world.split(in_exchange ? group : -1, owner == me ? 0 : me + 1);
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
    cache::ObjectRecord obj;
    if (!g) {
      obj.graph_key = info.graph_key;
      obj.raw = bytes;
      bool has_program = false;
      g = cache::load_object(obj, params, &has_program);
      g->trace.signature.bind(args);  // the cheap check of the call's inputs
    }
    // 6. Persist: one writer per store gathers new entries and objects.
    t = now();
    persist(world, infos, plan, g, obj, params, rep);
    rep.persist_s = now() - t;
    return g;
  }

  void persist(const Comm& world, const std::vector<RankInfo>& infos, const Plan& plan,
               const std::shared_ptr<compiler::CompiledGraph>& g, const cache::ObjectRecord& obj,
               const std::vector<std::string>& params, MethodReport& rep) {
    const int me = world.rank();
    const RankInfo& info = infos[static_cast<std::size_t>(me)];
    const int store_group = plan.store_group[static_cast<std::size_t>(me)];
    Comm sc = world.split(store_group, me);
    cache::Bundle mine;
    if (info.needs) {
      // The owner's bytes: one artifact per key, byte-identical on every rank.
      cache::ObjectRecord o = cache::make_object(*g, info.graph_key, true, ctx_.who, &obj.raw);
      cache::EntryRecord e = cache::make_entry(*g, ctx_.path, ctx_.key, info.graph_key, ctx_.who, o);
      e.parameters = params;
      mine.entries.push_back(e);
      if (plan.ships_object[static_cast<std::size_t>(me)]) mine.objects.push_back(o);
      cache::remember(e, o);
    }
    const auto parts = sc.gather(mine.entries.empty() ? std::string() : cache::write_bundle(mine), 0);
    if (sc.rank() == 0) {
      cache::Hdf5Store::Transaction tx;
      std::vector<std::string> paths;
      for (const auto& p : parts) {
        if (p.empty()) continue;
        cache::Bundle b = cache::read_bundle(p);
        for (auto& o : b.objects) tx.objects.push_back(std::move(o));
        for (auto& e : b.entries) {
          paths.push_back(e.path);
          tx.entries.push_back(std::move(e));
        }
      }
      if (!tx.entries.empty()) {
        cache::Hdf5Store(ctx_.dir).commit(tx);
        cache::record_save(ctx_.dir, paths);
        rep.writer = true;
        log::info("Cache {} entries saved to {} by rank {}", tx.entries.size(), ctx_.dir, me);
      }
    }
    world.barrier();
  }

  cache::CacheContext ctx_;
  CoordinatorOptions coord_;
};

}  // namespace

std::vector<MethodReport> reports() {
  std::lock_guard lock(g_reports_mu);
  return g_reports;
}

void clear_reports() {
  std::lock_guard lock(g_reports_mu);
  g_reports.clear();
}

namespace detail {

std::shared_ptr<npucache::detail::EntrySource> make_coordinated_source(const nn::Module& module,
                                                                       const CacheOptions& options,
                                                                       const CoordinatorOptions& coord,
                                                                       CompileOptions& co) {
  co = npucache::detail::to_compile_options(options);
  return std::make_shared<CoordinatedSource>(module, options, coord, *co.config);
}

}  // namespace detail
}  // namespace npucache::dist
