#include "tools/job_setup.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include "mpi/comm.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

namespace npucache::tools {
namespace {

std::string shipped_names() {
  std::string s;
  for (const auto& n : models::shipped_config_names()) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none found" : s;
}

// The process's peak resident memory (VmHWM of /proc/self/status), 0 when
// unknown.
std::size_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<std::size_t>(std::stoull(line.substr(6))) * 1024;
  return 0;
}

}  // namespace

void add_job_options(CLI::App* cmd, JobArgs& a) {
  cmd->add_option("--model", a.model,
                  "tiny-llama (default), a shipped config (" + shipped_names() + ") or a path to a config.json");
  cmd->add_option("--tp", a.tp, "tensor-parallel size")->check(CLI::PositiveNumber);
  cmd->add_option("--pp", a.pp, "pipeline-parallel size")->check(CLI::PositiveNumber);
  cmd->add_option("--cache-dir", a.cache_dir, "cache directory (default $NPUCACHE_CACHE_DIR or .npucache)");
  cmd->add_option("--mode", a.mode, "max-autotune or reduce-overhead");
  cmd->add_flag("--ge-cache", a.ge_cache, "store the compiled program (always on when coordinated)");
  cmd->add_flag("--independent", a.independent, "every rank compiles on its own (baseline)");
  cmd->add_option("--report-json", a.report_json, "write the job report (rank 0)");
  cmd->add_option("--timeout", a.timeout_s, "seconds to wait for every rank");
  cmd->add_option("--autotune-candidates", a.autotune_candidates, "tilings timed per heavy kernel");
  cmd->add_option("--size", a.size, "tiny-llama size: small (default) or large")->check(CLI::IsMember({"small", "large"}));
  cmd->add_option("--max-seq", a.max_seq, "cap the KV-cache length (default: the config's max_position_embeddings)")
      ->check(CLI::PositiveNumber);
}

Job::Job(const JobArgs& a, models::Weights weights) : args(a), config(model_config(a)) {
  parse_compile_mode(args.mode);
  int argc = 0;
  char** argv = nullptr;
  mpi = std::make_unique<MpiSession>(&argc, &argv);
  comm = make_mpi_communicator(args.tp, args.pp);
  set_current_communicator(comm.get());
  set_current_device(comm->global_rank() % Platform::get().device_count());
  model = std::make_unique<models::Decoder>(config, models::stage_ranks(*comm), weights);
}

models::DecoderConfig model_config(const JobArgs& a) {
  if (a.model == "seed-example" || a.model == "mlp")
    throw ConfigError("--model '" + a.model + "': the multi-rank jobs run the sharded decoder (tiny-llama or a "
                      "config.json); seed-example and mlp are single-stage examples of the library");
  if (a.size != "small" && a.model != "tiny-llama")
    throw ConfigError("--size " + a.size + " applies to tiny-llama only, not to --model '" + a.model + "'");
  models::DecoderConfig c = models::resolve_model(a.model == "tiny-llama" && a.size == "large" ? "tiny-llama-large"
                                                                                               : a.model);
  if (a.max_seq > 0) c.max_seq = std::min(c.max_seq, a.max_seq);
  return c;
}

Job::~Job() { set_current_communicator(nullptr); }

CacheOptions Job::cache_options(const std::string& method) const {
  CacheOptions o;
  o.cache_dir = args.cache_dir;
  o.compile.method_name = method;
  o.ge_cache = args.ge_cache;
  CompilerConfig c;
  c.mode = parse_compile_mode(args.mode);
  c.autotune_candidates = args.autotune_candidates;
  o.compile.config = c;
  o.tp_rank = comm->rank(GroupRole::tp);
  o.pp_rank = comm->rank(GroupRole::pp);
  return o;
}

dist::CoordinatorOptions Job::coordinator() const {
  dist::CoordinatorOptions c;
  c.timeout_s = args.timeout_s;
  c.independent = args.independent;
  return c;
}

ExampleInputs example_inputs() {
  std::vector<int64_t> toks{1, 17, 42, 99, 7, 3, 250, 12}, pos{0, 1, 2, 3, 4, 5, 6, 7};
  return {Tensor::from_vector_i64(toks, {1, 8}), Tensor::from_vector_i64(pos, {1, 8}),
          Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({8}, {1, 1})};
}

namespace {

nlohmann::json to_json(const MethodReport& r) {
  return {{"method", r.method},       {"graph_key", r.graph_key}, {"hit", r.hit},
          {"compiled", r.compiled},   {"fetched", r.fetched},     {"read_store", r.read_store},
          {"owner", r.owner},         {"trace_s", r.trace_s},     {"compile_s", r.compile_s},
          {"compile_cpu_s", r.compile_cpu_s},
          {"exchange_s", r.exchange_s}, {"persist_s", r.persist_s}, {"total_s", r.total_s},
          {"bytes_received", r.bytes_received}, {"artifact_bytes", r.artifact_bytes}, {"writer", r.writer}};
}

}  // namespace

void report_job(Job& job, const std::string& title, double wall_s, const std::string& extra_json) {
  nlohmann::json methods_mine = nlohmann::json::array();
  for (const auto& r : dist::reports()) methods_mine.push_back(to_json(r));
  const nlohmann::json mine = {{"methods", methods_mine}, {"peak_rss_bytes", peak_rss_bytes()}};
  const mpi::Comm world = mpi::Comm::world();
  const auto all = world.gather(mine.dump(), 0);
  if (world.rank() != 0) return;
  nlohmann::json per_rank = nlohmann::json::array();
  std::set<std::string> keys;
  int compiled = 0, loaded = 0, fetched = 0;
  double compile_cpu = 0, exchange = 0, persist = 0;
  std::size_t bytes = 0;
  std::map<std::string, std::pair<int, double>> owners;  // graph key -> (owner, compile_s)
  std::size_t peak_rss = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const nlohmann::json rank = nlohmann::json::parse(all[r]);
    const nlohmann::json& methods = rank["methods"];
    const std::size_t rss = rank["peak_rss_bytes"].get<std::size_t>();
    peak_rss = std::max(peak_rss, rss);
    nlohmann::json keys_r = nlohmann::json::array();
    bool hit = true;
    double cs = 0, elapsed = 0;
    for (const auto& m : methods) {
      keys.insert(m["graph_key"].get<std::string>());
      keys_r.push_back(m["graph_key"]);
      compiled += m["compiled"].get<bool>();
      loaded += m["hit"].get<bool>();
      fetched += m["fetched"].get<bool>();
      hit = hit && m["hit"].get<bool>();
      cs += m["compile_cpu_s"].get<double>();
      elapsed += m["compile_s"].get<double>();
      exchange = std::max(exchange, m["exchange_s"].get<double>());
      persist = std::max(persist, m["persist_s"].get<double>());
      bytes += m["bytes_received"].get<std::size_t>();
      if (m["compiled"].get<bool>())
        owners[m["graph_key"].get<std::string>()] = {static_cast<int>(r), m["compile_cpu_s"].get<double>()};
    }
    compile_cpu += cs;
    per_rank.push_back({{"rank", r}, {"graph_keys", keys_r}, {"hit", hit}, {"compile_s", elapsed},
                        {"compile_cpu_s", cs}, {"peak_rss_bytes", rss}, {"methods", methods}});
  }
  const auto& c = job.config;
  const bool meta = job.model->weights() == models::Weights::meta;
  nlohmann::json report = {{"model", c.name}, {"architecture", c.architecture}, {"layers", c.layers},
                           {"weights", meta ? "meta" : "deterministic"}, {"max_peak_rss_bytes", peak_rss},
                           {"world_size", job.world()}, {"tp", job.args.tp}, {"pp", job.args.pp},
                           {"mode", job.args.mode}, {"independent", job.args.independent},
                           {"unique_subgraphs", keys.size()}, {"compiled", compiled}, {"loaded", loaded},
                           {"fetched", fetched}, {"wall_s", wall_s}, {"compile_cpu_s", compile_cpu},
                           {"bytes_exchanged", bytes}, {"exchange_s", exchange},
                           {"exchange_gbps", exchange > 0 ? static_cast<double>(bytes) / exchange / 1e9 : 0.0},
                           {"persist_s", persist}, {"per_rank", per_rank}};
  if (!extra_json.empty()) report.update(nlohmann::json::parse(extra_json));
  std::printf("== %s: world %d, tp %d, pp %d, %s%s\n", title.c_str(), job.world(), job.args.tp, job.args.pp,
              job.args.mode.c_str(), job.args.independent ? ", independent" : ", coordinated");
  std::printf("  model             %s (%s, %lld layers, hidden %lld), %s weights\n", c.name.c_str(),
              c.architecture.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.hidden),
              meta ? "meta" : "deterministic");
  std::printf("  unique subgraphs  %zu\n", keys.size());
  for (const auto& [k, o] : owners)
    std::printf("    %s  compiled by rank %d in %.1f ms CPU\n", k.substr(0, 16).c_str(), o.first, o.second * 1e3);
  std::printf("  compiles          %d (compile CPU %.1f ms summed over ranks)\n", compiled, compile_cpu * 1e3);
  std::printf("  cache hits        %d of %zu rank-methods\n", loaded, all.size() * (per_rank.empty() ? 0 : per_rank[0]["methods"].size()));
  std::printf("  fetched           %d artifacts, %zu bytes exchanged in %.2f ms (%.3f GB/s)\n", fetched, bytes,
              exchange * 1e3, exchange > 0 ? static_cast<double>(bytes) / exchange / 1e9 : 0.0);
  std::printf("  persist           %.2f ms\n", persist * 1e3);
  std::printf("  wall              %.1f ms (start of cache work to every rank ready)\n", wall_s * 1e3);
  std::printf("  peak RSS          %.1f MiB (the largest of any rank)\n", static_cast<double>(peak_rss) / (1 << 20));
  if (!job.args.report_json.empty()) {
    std::ofstream f(job.args.report_json);
    f << report.dump(2) << "\n";
    std::printf("  report            %s\n", job.args.report_json.c_str());
  }
}

}  // namespace npucache::tools
