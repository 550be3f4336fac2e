#include "tools/job_setup.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include <npucache/version.h>

#include "cache/remote_options.h"
#include "compiler/surface.h"
#include "coord/job_identity.h"
#include "mpi/comm.h"
#include "storage/dir.h"
#include "storage/remote_tier.h"
#include "tools/commands.h"

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace npucache::tools {

namespace {

std::string shipped_names() {
  std::string s;
  for (const auto& n : models::shipped_config_names()) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none found" : s;
}

// Why `path` cannot take the job report ("" when it can): checked before
// the job starts, so a long job does not end without its report.
std::string report_path_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) return "it is a directory";
  if (fs::exists(p, ec))
    return ::access(path.c_str(), W_OK) == 0 ? "" : std::string("it is not writable: ") + std::strerror(errno);
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) return "its directory " + parent.string() + " does not exist";
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    return "its directory " + parent.string() + " is not writable: " + std::strerror(errno);
  return "";
}

// The error for a --report-json path that cannot be written; "" when it can.
std::string report_path_error(const std::string& path) {
  const std::string why = report_path_problem(path);
  return why.empty() ? "" : "--report-json " + path + " cannot be written (" + why + "); give a writable path";
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
  cmd->add_option("--tp", a.tp, "tensor-parallel size")->check(positive_integer());
  cmd->add_option("--pp", a.pp, "pipeline-parallel size")->check(positive_integer());
  cmd->add_option("--cache-dir", a.cache_dir, "cache directory (default: $NPUCACHE_CACHE_DIR, else .npucache)");
  cmd->add_option("--backend", a.backend,
                  "npu (TorchAir's CompilerConfig), inductor or npugraphs (torch.compile's backends)")
      ->check(CLI::IsMember({"npu", "inductor", "npugraphs"}));
  cmd->add_option("--mode", a.mode,
                  "npu: max-autotune or reduce-overhead; inductor: default, reduce-overhead, max-autotune or "
                  "max-autotune-no-cudagraphs; npugraphs: none")
      ->default_str("max-autotune for npu, default for inductor");
  cmd->add_option("--dynamic", a.dynamic, "dynamic shapes: true, false or auto (automatic dynamic)")
      ->check(CLI::IsMember({"true", "false", "auto"}));
  cmd->add_flag("--ge-cache", a.ge_cache, "store the compiled program (always on when coordinated)");
  cmd->add_flag("--independent", a.independent, "every rank compiles on its own (baseline)");
  cmd->add_option("--report-json", a.report_json, "write the job report (rank 0)");
  cmd->add_option("--timeout", a.timeout,
                  "seconds any collective may take before the job reports the ranks that did not answer and ends "
                  "(a positive number)");
  cmd->add_flag("--flat-exchange", a.flat_exchange,
                "send each artifact in one tree over ranks, ignoring hosts (benchmark baseline)");
  cmd->add_option("--autotune-candidates", a.autotune_candidates, "tilings timed per heavy kernel");
  add_size_option(cmd, a.size);
  cmd->add_flag("--check-args", a.check_only,
                "check the arguments (model config, tp/pp, report path) without starting MPI, then exit "
                "(the launch scripts run this before mpirun)");
  cmd->add_option("--remote", a.remote,
                  "remote cache tier: redis://host:port[/db][?timeout=2s&connect-timeout=100ms] or "
                  "redis+unix:///path (default: $NPUCACHE_REMOTE; off: none)");
  cmd->add_flag("--remote-read-only", a.remote_read_only, "read from the remote cache, never write to it");
  cmd->add_option("--max-seq", a.max_seq, "cap the KV-cache length")
      ->check(positive_integer())
      ->default_str("the config's max_position_embeddings");
}

double parse_timeout(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0)
    throw ConfigError("--timeout '" + text +
                      "' is not a positive number of seconds: give how long any collective may take (the longest "
                      "compile included), e.g. --timeout 120");
  return v;
}

void agree_job(const std::string& command, const std::vector<std::pair<std::string, std::string>>& fields,
               double timeout_s) {
  coord::JobIdentity id{{"command", command}, {"npucache version", version()}};
  for (const auto& [k, v] : fields) id.push_back({k, v});
  coord::agree_job_identity(id, timeout_s);
}

void guarded(const std::function<void()>& f) {
  // A single process (or one that never started MPI) leaves the error to
  // main, which prints it and sets the exit status.
  const auto multi = [] { return MpiSession::initialized() && MpiSession::world_size() > 1; };
  const auto print = [](const std::exception& e) {
    std::fprintf(stderr, "npucache: error on rank %d: %s\n", MpiSession::world_rank(), e.what());
    std::fflush(stderr);
  };
  try {
    f();
  } catch (const coord::JobMismatch& e) {
    if (!multi()) throw;
    // Every rank has this error and none is in a collective: end normally.
    print(e);
    MpiSession::finalize();
    set_exit_code(2);
  } catch (const TimeoutError& e) {
    if (!multi()) throw;
    print(e);
    // The other ranks that can still speak print theirs at about the same
    // moment; the first abort would cut them off.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MpiSession::abort(1);
  } catch (const std::exception& e) {
    if (!multi()) throw;
    print(e);
    MpiSession::abort(dynamic_cast<const ConfigError*>(&e) ? 2 : 1);
  }
}

std::string config_hash(const models::DecoderConfig& c) {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "arch=%s vocab=%lld hidden=%lld layers=%lld heads=%lld kv_heads=%lld "
                "intermediate=%lld max_seq=%lld rope_theta=%.17g eps=%.17g qkv_bias=%d o_bias=%d tie=%d seed=%llu",
                c.architecture.c_str(), static_cast<long long>(c.vocab), static_cast<long long>(c.hidden),
                static_cast<long long>(c.layers), static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads),
                static_cast<long long>(c.intermediate), static_cast<long long>(c.max_seq), c.rope_theta, c.eps,
                c.qkv_bias ? 1 : 0, c.o_bias ? 1 : 0, c.tie_word_embeddings ? 1 : 0,
                static_cast<unsigned long long>(c.seed));
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(coord::identity_hash(buf)));
  return hex;
}

namespace {

// The options every rank of a job must share. Every option of warmup and
// infer, and whether ranks may differ in it:
//   --model, --size, --max-seq   no: the model config (its hash is a field
//                                too) decides every graph and collective
//   --tp, --pp                   no: the groups and their collectives
//   --mode, --autotune-candidates, --ge-cache
//                                no: the programs and what the entries hold
//   --independent, --flat-exchange
//                                no: which coordinator collectives run
//   --timeout                    no: one rank giving up before the others
//                                would turn a slow step into a failure
//   --report-json                no: every rank takes part in checking the
//                                path (a broadcast from rank 0) when it is
//                                given, and rank 0 writes the file named
//   --tokens (infer)             no: the number of decode steps
//   --cache-dir                  may differ: node-local directories, one
//                                store each (the coordinator elects a
//                                writer per store)
//   --check-args, --help         end the process before MPI starts: a rank
//                                given them never arrives, which the bound
//                                on MPI initialisation reports
std::vector<std::pair<std::string, std::string>> job_fields(const JobArgs& a, const models::DecoderConfig& c) {
  std::vector<std::pair<std::string, std::string>> f{{"--model", a.model},
                                                     {"model config", config_hash(c)},
                                                     {"--size", a.size},
                                                     {"--tp", std::to_string(a.tp)},
                                                     {"--pp", std::to_string(a.pp)},
                                                     {"--backend", a.backend},
                                                     {"--mode", effective_mode(a)},
                                                     {"--dynamic", a.dynamic},
                                                     {"--timeout", a.timeout},
                                                     {"--autotune-candidates", std::to_string(a.autotune_candidates)}};
  // Flags: present when given, so a difference reads "rank 3 has --ge-cache, ranks 0-2 have no --ge-cache".
  if (a.ge_cache) f.emplace_back("--ge-cache", "");
  if (a.independent) f.emplace_back("--independent", "");
  if (a.flat_exchange) f.emplace_back("--flat-exchange", "");
  if (a.max_seq > 0) f.emplace_back("--max-seq", std::to_string(a.max_seq));
  if (!a.report_json.empty()) f.emplace_back("--report-json", a.report_json);
  if (a.command == "infer") f.emplace_back("--tokens", std::to_string(a.tokens));
  return f;
}

}  // namespace

std::string effective_mode(const JobArgs& a) {
  if (!a.mode.empty()) return a.mode;
  return a.backend == "npu" ? "max-autotune" : a.backend == "inductor" ? "default" : "";
}

namespace {
// The compile options of a job's methods (checked by resolve_surface).
CompileOptions job_compile_options(const JobArgs& a) {
  CompileOptions o;
  if (a.backend == "npu") {
    CompilerConfig c;
    c.mode = parse_compile_mode(effective_mode(a));
    c.autotune_candidates = a.autotune_candidates;
    o.config = c;
  } else {
    o.backend = a.backend;
    if (!a.mode.empty()) o.mode = a.mode;
  }
  if (a.dynamic == "auto")
    o.dynamic = std::nullopt;
  else
    o.dynamic = a.dynamic != "false";
  o.fullgraph = true;
  return o;
}
}  // namespace

models::DecoderConfig check_args(JobArgs& a) {
  (void)compiler::resolve_surface(job_compile_options(a));  // ConfigError naming what is wrong
  a.timeout_s = parse_timeout(a.timeout);
  models::DecoderConfig c = model_config(a);
  c.validate(a.tp, a.pp);
  (void)cache::resolve_remote(remote_options(a));  // a malformed --remote is a usage error, before MPI
  if (a.check_only && !a.report_json.empty())
    if (std::string error = report_path_error(a.report_json); !error.empty()) throw ConfigError(error);
  return c;
}

Job::Job(const JobArgs& a, models::Weights weights) : args(a), config(check_args(args)) {
  int argc = 0;
  char** argv = nullptr;
  // --timeout bounds MPI initialisation too: a rank that never arrives
  // ends the job with its name.
  mpi = std::make_unique<MpiSession>(&argc, &argv, args.timeout_s);
  // Before any other collective: ranks started differently would meet in
  // collectives of different shapes.
  agree_job(args.command, job_fields(args, config), args.timeout_s);
  if (!args.report_json.empty()) {
    // Rank 0 writes the report; every rank learns whether it can (every
    // rank has the option: it is part of the job identity).
    std::string error = MpiSession::world_rank() == 0 ? report_path_error(args.report_json) : "";
    mpi::Comm::world().broadcast(error, 0, {"checking the report path", args.timeout_s});
    if (!error.empty()) throw coord::JobMismatch(error);
  }
  comm = make_mpi_communicator(args.tp, args.pp, args.timeout_s);
  set_current_communicator(comm.get());
  set_current_device(comm->global_rank() % Platform::get().device_count());
  model = std::make_unique<models::Decoder>(config, models::stage_ranks(*comm), weights);
}

const std::vector<std::string>& model_sizes() {
  static const std::vector<std::string> sizes{"small", "large"};
  return sizes;
}

void add_size_option(CLI::App* cmd, std::string& size) {
  std::string list;
  for (const auto& s : model_sizes()) list += (list.empty() ? "" : ", ") + s;
  cmd->add_option("--size", size, "tiny-llama size: " + list)
      ->check(CLI::Validator(
          [list](std::string& v) -> std::string {
            const auto& sizes = model_sizes();
            if (std::find(sizes.begin(), sizes.end(), v) != sizes.end()) return {};
            return "'" + v + "' is not a size of tiny-llama; the sizes are: " + list;
          },
          "SIZE"));
}

models::DecoderConfig sized_model(const std::string& model, const std::string& size) {
  if (size != "small" && model != "tiny-llama")
    throw ConfigError("--size " + size + " applies to tiny-llama only, not to --model '" + model + "'");
  return models::resolve_model(model == "tiny-llama" && size == "large" ? "tiny-llama-large" : model);
}

models::DecoderConfig model_config(const JobArgs& a) {
  if (a.model == "seed-example" || a.model == "mlp")
    throw ConfigError("--model '" + a.model +
                      "': the multi-rank jobs run the sharded decoder (tiny-llama or a "
                      "config.json); seed-example and mlp are single-stage examples of the library");
  models::DecoderConfig c = sized_model(a.model, a.size);
  if (a.max_seq > 0) c.max_seq = std::min(c.max_seq, a.max_seq);
  return c;
}

Job::~Job() {
  set_current_communicator(nullptr);
  // An error unwinds a multi-rank job, which is about to be aborted: the
  // stream workers may still run (or wait in) kernels that use the
  // communicator, so it and the model stay alive until the process ends.
  if (std::uncaught_exceptions() > 0 && mpi && MpiSession::world_size() > 1) {
    (void)comm.release();
    (void)model.release();
  }
}

RemoteOptions remote_options(const JobArgs& a) {
  RemoteOptions r;
  r.url = a.remote;
  if (a.remote_read_only) r.read_only = true;
  return r;
}

CacheOptions Job::cache_options(const std::string& method) const {
  CacheOptions o;
  o.remote = remote_options(args);
  o.cache_dir = args.cache_dir;
  o.compile.method_name = method;
  o.ge_cache = args.ge_cache;
  const std::string name = o.compile.method_name;
  o.compile = job_compile_options(args);
  o.compile.method_name = name;
  o.tp_rank = comm->rank(GroupRole::tp);
  o.pp_rank = comm->rank(GroupRole::pp);
  return o;
}

dist::CoordinatorOptions Job::coordinator() const {
  dist::CoordinatorOptions c;
  c.timeout_s = args.timeout_s;
  c.independent = args.independent;
  c.flat_exchange = args.flat_exchange;
  return c;
}

ExampleInputs example_inputs() {
  std::vector<int64_t> toks{1, 17, 42, 99, 7, 3, 250, 12}, pos{0, 1, 2, 3, 4, 5, 6, 7};
  return {Tensor::from_vector_i64(toks, {1, 8}), Tensor::from_vector_i64(pos, {1, 8}),
          Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({8}, {1, 1})};
}

namespace {

nlohmann::json to_json(const MethodReport& r) {
  nlohmann::json pass_times = nlohmann::json::object();  // of this rank's compile, when it compiled
  for (const auto& [pass, s] : r.pass_times_s) pass_times[pass] = s;
  return {{"method", r.method},
          {"graph_key", r.graph_key},
          {"hit", r.hit},
          {"compiled", r.compiled},
          {"fetched", r.fetched},
          {"read_store", r.read_store},
          {"remote", r.remote},
          {"remote_bytes", r.remote_bytes},
          {"owner", r.owner},
          {"trace_s", r.trace_s},
          {"compile_s", r.compile_s},
          {"compile_cpu_s", r.compile_cpu_s},
          {"exchange_s", r.exchange_s},
          {"persist_s", r.persist_s},
          {"total_s", r.total_s},
          {"bytes_received", r.bytes_received},
          {"artifact_bytes", r.artifact_bytes},
          {"writer", r.writer},
          {"pass_times_s", pass_times},
          {"kernels_tuned", r.kernels_tuned},
          {"kernels_reused", r.kernels_reused}};
}

// The coordinator's steps, in the order of docs/SCALING.md.
const char* const kSteps[] = {"setup",   "lookup", "arrival",  "keys", "plan",    "remote",
                              "produce", "status", "exchange", "load", "persist", "save"};

nlohmann::json to_json(const dist::StepReport& s) {
  return {{"setup", s.setup_s},       {"lookup", s.lookup_s}, {"arrival", s.arrival_s}, {"keys", s.keys_s},
          {"plan", s.plan_s},         {"remote", s.remote_s}, {"produce", s.produce_s}, {"status", s.status_s},
          {"exchange", s.exchange_s}, {"load", s.load_s},     {"persist", s.persist_s}, {"save", s.save_s}};
}

nlohmann::json method_json(const MethodReport& r, const dist::StepReport* s) {
  nlohmann::json j = to_json(r);
  if (s) {
    j["steps"] = to_json(*s);
    j["all_hit"] = s->all_hit;
    j["hosts"] = s->hosts;
    j["key_bytes"] = s->key_bytes;
    j["bytes_between_hosts"] = s->bytes_between_hosts;
    j["flat_bytes_between_hosts"] = s->flat_bytes_between_hosts;
    j["entries_written"] = s->entries_written;
    j["started_at"] = s->started_at;
    j["ended_at"] = s->ended_at;
  }
  return j;
}

// "0-3, 6": ascending ranks as runs.
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return s;
}

template <class T>
T value_or(const nlohmann::json& j, const char* key, T fallback) {
  return j.contains(key) ? j[key].get<T>() : fallback;
}

}  // namespace

void report_job(Job& job, const std::string& title, double wall_s, const std::string& extra_json) {
  nlohmann::json methods_mine = nlohmann::json::array();
  const auto steps = dist::step_reports();
  std::size_t next_step = 0;
  for (const auto& r : dist::reports()) {
    // Step reports exist for coordinated methods only, in the same order.
    const dist::StepReport* s = nullptr;
    if (next_step < steps.size() && steps[next_step].method == r.method) s = &steps[next_step++];
    methods_mine.push_back(method_json(r, s));
  }
  const nlohmann::json mine = {{"methods", methods_mine},
                               {"peak_rss_bytes", peak_rss_bytes()},
                               {"captures", {job.captures_recorded, job.captures_restored, job.captures_recaptured}}};
  const mpi::Comm world = mpi::Comm::world();
  const auto all = world.gather(mine.dump(), 0, {"job report: gathering every rank's report", job.args.timeout_s});
  if (world.rank() != 0) return;
  nlohmann::json per_rank = nlohmann::json::array();
  std::set<std::string> keys;
  int compiled = 0, loaded = 0, fetched = 0, writers = 0, entries_written = 0, hosts = 1, remote_reads = 0;
  std::size_t remote_bytes = 0;
  int kernels_tuned = 0, kernels_reused = 0;
  std::size_t captures[3] = {0, 0, 0};  // recorded, restored, recaptured, over ranks
  double compile_cpu = 0, exchange = 0, persist = 0;
  std::size_t bytes = 0, between = 0, flat_between = 0;
  // graph key -> (the ranks that compiled it, their compile CPU summed)
  std::map<std::string, std::pair<std::vector<int>, double>> owners;
  std::size_t peak_rss = 0;
  std::map<std::string, std::map<std::string, double>> step_max;  // method -> step -> max over ranks
  std::map<std::string, std::map<std::string, double>> step_min;  // method -> step -> min over ranks
  std::map<std::string, std::pair<double, double>> span;          // method -> (last start, last end)
  for (std::size_t r = 0; r < all.size(); ++r) {
    const nlohmann::json rank = nlohmann::json::parse(all[r]);
    const nlohmann::json& methods = rank["methods"];
    const std::size_t rss = rank["peak_rss_bytes"].get<std::size_t>();
    peak_rss = std::max(peak_rss, rss);
    for (std::size_t k = 0; k < 3; ++k) captures[k] += rank["captures"].at(k).get<std::size_t>();
    nlohmann::json keys_r = nlohmann::json::array();
    bool hit = true;
    double cs = 0, elapsed = 0;
    for (const auto& m : methods) {
      keys.insert(m["graph_key"].get<std::string>());
      keys_r.push_back(m["graph_key"]);
      compiled += m["compiled"].get<bool>();
      loaded += m["hit"].get<bool>();
      fetched += m["fetched"].get<bool>();
      remote_reads += value_or<bool>(m, "remote", false);
      remote_bytes += value_or<std::size_t>(m, "remote_bytes", 0);
      writers += m["writer"].get<bool>();
      kernels_tuned += value_or<int>(m, "kernels_tuned", 0);
      kernels_reused += value_or<int>(m, "kernels_reused", 0);
      hit = hit && m["hit"].get<bool>();
      cs += m["compile_cpu_s"].get<double>();
      elapsed += m["compile_s"].get<double>();
      exchange = std::max(exchange, m["exchange_s"].get<double>());
      persist = std::max(persist, m["persist_s"].get<double>());
      bytes += m["bytes_received"].get<std::size_t>();
      between += value_or<std::size_t>(m, "bytes_between_hosts", 0);
      flat_between += value_or<std::size_t>(m, "flat_bytes_between_hosts", 0);
      entries_written += value_or<int>(m, "entries_written", 0);
      hosts = std::max(hosts, value_or<int>(m, "hosts", 1));
      if (m.contains("steps")) {
        const std::string method = m["method"].get<std::string>();
        for (const char* st : kSteps) {
          const double v = m["steps"][st].get<double>();
          double& mx = step_max[method][st];
          mx = std::max(mx, v);
          auto [it, fresh] = step_min[method].try_emplace(st, v);
          if (!fresh) it->second = std::min(it->second, v);
        }
        auto [it, fresh] = span.try_emplace(method, m["started_at"].get<double>(), m["ended_at"].get<double>());
        if (!fresh) {
          it->second.first = std::max(it->second.first, m["started_at"].get<double>());
          it->second.second = std::max(it->second.second, m["ended_at"].get<double>());
        }
      }
      if (m["compiled"].get<bool>()) {
        auto& o = owners[m["graph_key"].get<std::string>()];
        o.first.push_back(static_cast<int>(r));
        o.second += m["compile_cpu_s"].get<double>();
      }
    }
    compile_cpu += cs;
    per_rank.push_back({{"rank", r},
                        {"graph_keys", keys_r},
                        {"hit", hit},
                        {"compile_s", elapsed},
                        {"compile_cpu_s", cs},
                        {"peak_rss_bytes", rss},
                        {"methods", methods}});
  }
  // Each step's time, summed over methods: the slowest rank's (steps_s)
  // and the fastest rank's (steps_min_s: for a collective, the last rank to
  // arrive waits least, so its time is the collective's own); and the
  // coordinator's own time (coordination_s): from the moment the last rank
  // began a method to the moment the last rank finished it, summed over
  // methods (the ranks' skew before that is not the coordinator's).
  nlohmann::json steps_s = nlohmann::json::object(), steps_min_s = nlohmann::json::object();
  for (const char* st : kSteps) {
    double sum = 0, sum_min = 0;
    for (const auto& [method, m] : step_max) sum += m.at(st);
    for (const auto& [method, m] : step_min) sum_min += m.at(st);
    steps_s[st] = sum;
    steps_min_s[st] = sum_min;
  }
  double coordination = 0;
  for (const auto& [method, se] : span) coordination += se.second - se.first;
  const auto& c = job.config;
  const bool meta = job.model->weights() == models::Weights::meta;
  nlohmann::json report = {{"model", c.name},
                           {"architecture", c.architecture},
                           {"layers", c.layers},
                           {"weights", meta ? "meta" : "deterministic"},
                           {"max_peak_rss_bytes", peak_rss},
                           {"world_size", job.world()},
                           {"tp", job.args.tp},
                           {"pp", job.args.pp},
                           {"backend", job.args.backend},
                           {"mode", effective_mode(job.args)},
                           {"dynamic", job.args.dynamic},
                           {"independent", job.args.independent},
                           {"flat_exchange", job.args.flat_exchange},
                           {"hosts", hosts},
                           {"unique_subgraphs", keys.size()},
                           {"compiled", compiled},
                           {"loaded", loaded},
                           {"fetched", fetched},
                           {"remote_reads", remote_reads},
                           {"remote_bytes_read", remote_bytes},
                           {"writers", writers},
                           {"kernels_tuned", kernels_tuned},
                           {"kernels_reused", kernels_reused},
                           {"captures_recorded", captures[0]},
                           {"captures_restored", captures[1]},
                           {"captures_recaptured", captures[2]},
                           {"entries_written", entries_written},
                           {"wall_s", wall_s},
                           {"compile_cpu_s", compile_cpu},
                           {"bytes_exchanged", bytes},
                           {"bytes_between_hosts", between},
                           {"flat_bytes_between_hosts", flat_between},
                           {"exchange_s", exchange},
                           {"exchange_gbps", exchange > 0 ? static_cast<double>(bytes) / exchange / 1e9 : 0.0},
                           {"persist_s", persist},
                           {"steps_s", steps_s},
                           {"steps_min_s", steps_min_s},
                           {"coordination_s", coordination},
                           {"per_rank", per_rank}};
  if (!extra_json.empty()) report.update(nlohmann::json::parse(extra_json));
  std::printf("== %s: world %d on %d host%s, tp %d, pp %d, %s%s\n", title.c_str(), job.world(), hosts,
              hosts == 1 ? "" : "s", job.args.tp, job.args.pp, effective_mode(job.args).c_str(),
              job.args.independent ? ", independent" : ", coordinated");
  std::printf("  model             %s (%s, %lld layers, hidden %lld), %s weights\n", c.name.c_str(),
              c.architecture.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.hidden),
              meta ? "meta" : "deterministic");
  std::printf("  unique subgraphs  %zu\n", keys.size());
  for (const auto& [k, o] : owners) {
    if (o.first.size() == 1)
      std::printf("    %s  compiled by rank %d in %.1f ms CPU\n", k.substr(0, 16).c_str(), o.first[0], o.second * 1e3);
    else
      std::printf("    %s  compiled by %zu ranks (%s) in %.1f ms CPU summed\n", k.substr(0, 16).c_str(), o.first.size(),
                  rank_list(o.first).c_str(), o.second * 1e3);
  }
  std::printf("  compiles          %d (compile CPU %.1f ms summed over ranks)\n", compiled, compile_cpu * 1e3);
  std::printf("  tuning            %d kernels tuned, %d reused from the tuning table\n", kernels_tuned, kernels_reused);
  if (captures[0] + captures[1] + captures[2] > 0)
    std::printf("  captures          %zu recorded, %zu restored from templates, %zu stored templates not usable\n",
                captures[0], captures[1], captures[2]);
  std::printf("  cache hits        %d of %zu rank-methods\n", loaded,
              all.size() * (per_rank.empty() ? 0 : per_rank[0]["methods"].size()));
  std::printf("  fetched           %d artifacts, %zu bytes exchanged in %.2f ms (%.3f GB/s)\n", fetched, bytes,
              exchange * 1e3, exchange > 0 ? static_cast<double>(bytes) / exchange / 1e9 : 0.0);
  if (remote_reads > 0) std::printf("  remote cache      %d artifacts read, %zu bytes\n", remote_reads, remote_bytes);
  if (hosts > 1) std::printf("  between hosts     %zu bytes (a flat broadcast: %zu)\n", between, flat_between);
  // One rank per cache directory and method writes that method's entries
  // to the index: `writers` counts those (rank, method) index writes.
  std::printf(
      "  persist           %.2f ms, %d entries written to the index in %d write%s (one rank per cache "
      "directory and method)\n",
      persist * 1e3, entries_written, writers, writers == 1 ? "" : "s");
  std::printf("  wall              %.1f ms (start of cache work to every rank ready)\n", wall_s * 1e3);
  std::printf("  peak RSS          %.1f MiB (the largest of any rank)\n", static_cast<double>(peak_rss) / (1 << 20));
  if (!job.args.report_json.empty()) {
    // Whole or not at all, through an exclusively created temporary that
    // never follows a link (the report may go to a shared directory).
    try {
      cache::write_file_atomically(job.args.report_json, report.dump(2) + "\n");
    } catch (const std::exception& e) {
      throw Error("could not write the job report " + job.args.report_json + " (" + e.what() + ")");
    }
    std::printf("  report            %s\n", job.args.report_json.c_str());
  }
}

}  // namespace npucache::tools
