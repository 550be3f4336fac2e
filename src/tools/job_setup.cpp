#include "tools/job_setup.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include <npucache/version.h>

#include "cache/remote_options.h"
#include "compiler/surface.h"
#include "coord/job_identity.h"
#include "coord/job_progress.h"
#include "mpi/comm.h"
#include "storage/dir.h"
#include "storage/metrics.h"
#include "storage/remote_tier.h"
#include "storage/stats.h"
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
#include <iomanip>
#include <locale>
#include <sstream>
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
  cmd->add_flag("--no-regions", a.no_regions,
                "trace every decoder layer inline instead of as a compile region traced and compiled once");
  cmd->add_flag("--independent", a.independent, "every rank compiles on its own (baseline)");
  cmd->add_option("--report-json", a.report_json, "write the job report (rank 0)");
  cmd->add_option("--timeout", a.timeout,
                  "seconds any collective may take before the job reports the ranks that did not answer and ends "
                  "(a positive number)");
  cmd->add_flag("--flat-exchange", a.flat_exchange,
                "send each artifact in one tree over ranks, ignoring hosts (benchmark baseline)");
  cmd->add_flag("--no-region-waves", a.no_region_waves,
                "ranks of different cache directories each compile the regions their programs share, in parallel, "
                "instead of once per job in two waves");
  cmd->add_option("--autotune-candidates", a.autotune_candidates, "tilings timed per heavy kernel");
  add_size_option(cmd, a.size);
  cmd->add_flag("--check-args", a.check_only,
                "check the arguments (model config, tp/pp, report path) without starting MPI, then exit "
                "(the launch scripts run this before mpirun)");
  cmd->add_flag("--dry-run", a.dry_run,
                "predict, per rank-method, what the job would do (load, fetch from a rank or the remote, "
                "compile and why) from every rank's keys and the coordinator's plan, with meta weights; "
                "nothing is compiled or written; --report-json has the real run's fields and \"dry_run\": true");
  cmd->add_option("--remote", a.remote,
                  "remote cache tier: redis://host:port[/db][?timeout=2s&connect-timeout=100ms], "
                  "redis+unix:///path or file:///shared/dir (default: $NPUCACHE_REMOTE; off: none)");
  cmd->add_flag("--remote-read-only", a.remote_read_only, "read from the remote cache, never write to it");
  cmd->add_option("--signing-key", a.signing_key,
                  "sign what is written to the remote with this signing.key (default: $NPUCACHE_REMOTE_SIGNING_KEY)");
  cmd->add_option("--trusted-keys", a.trusted_keys,
                  "use only remote values signed by a public key of this file "
                  "(default: $NPUCACHE_REMOTE_TRUSTED_KEYS)");
  cmd->add_option("--progress", a.progress,
                  "rank 0's progress line after each method (rank-methods loaded, compiled, received of the "
                  "job's, per host): auto (when the launcher's stderr is a terminal), always or never; "
                  "NPUCACHE_PROGRESS=1/0 overrides")
      ->default_str("auto");
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
  // Doubles as printf's %.17g (round-trip exact), in the classic locale.
  std::ostringstream text;
  text.imbue(std::locale::classic());
  text << std::setprecision(17) << "arch=" << c.architecture << " vocab=" << c.vocab << " hidden=" << c.hidden
       << " layers=" << c.layers << " heads=" << c.heads << " kv_heads=" << c.kv_heads
       << " intermediate=" << c.intermediate << " max_seq=" << c.max_seq << " rope_theta=" << c.rope_theta
       << " eps=" << c.eps << " qkv_bias=" << (c.qkv_bias ? 1 : 0) << " o_bias=" << (c.o_bias ? 1 : 0)
       << " tie=" << (c.tie_word_embeddings ? 1 : 0) << " seed=" << c.seed;
  std::ostringstream hex;
  hex << std::hex << std::setw(16) << std::setfill('0') << coord::identity_hash(text.str());
  return hex.str();
}

namespace {

// The options every rank of a job must share. Every option of warmup and
// infer, and whether ranks may differ in it:
//   --model, --size, --max-seq   no: the model config (its hash is a field
//                                too) decides every graph and collective
//   --tp, --pp                   no: the groups and their collectives
//   --mode, --autotune-candidates, --ge-cache
//                                no: the programs and what the entries hold
//   --independent, --flat-exchange, --dry-run
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
  if (a.no_regions) f.emplace_back("--no-regions", "");
  if (a.independent) f.emplace_back("--independent", "");
  if (a.flat_exchange) f.emplace_back("--flat-exchange", "");
  if (a.no_region_waves) f.emplace_back("--no-region-waves", "");
  if (a.dry_run) f.emplace_back("--dry-run", "");
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
  o.regions = !a.no_regions;
  return o;
}
}  // namespace

models::DecoderConfig check_args(JobArgs& a) {
  (void)compiler::resolve_surface(job_compile_options(a));  // ConfigError naming what is wrong
  a.timeout_s = parse_timeout(a.timeout);
  (void)coord::parse_progress_mode(a.progress);
  models::DecoderConfig c = model_config(a);
  c.validate(a.tp, a.pp);
  if (a.dry_run && a.independent)
    throw ConfigError(
        "--dry-run predicts the coordinated plan, and --independent has none: drop one of them (an independent "
        "job compiles every rank-method that misses its own entry)");
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
  {
    // One job id for every rank's miss records (explain groups by it), even
    // under a launcher that exports none the ranks could read.
    std::string job_id = storage::this_job();
    mpi::Comm::world().broadcast(job_id, 0, {"agreeing on the job's id", args.timeout_s});
    storage::set_this_job(job_id);
  }
  if (!args.report_json.empty()) {
    // Rank 0 writes the report; every rank learns whether it can (every
    // rank has the option: it is part of the job identity).
    std::string error = MpiSession::world_rank() == 0 ? report_path_error(args.report_json) : "";
    mpi::Comm::world().broadcast(error, 0, {"checking the report path", args.timeout_s});
    if (!error.empty()) throw coord::JobMismatch(error);
  }
  coord::JobProgress::get().configure(coord::parse_progress_mode(args.progress), 2);  // prompt and decode
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
  r.signing_key_file = a.signing_key;
  r.trusted_keys_file = a.trusted_keys;
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
  c.region_waves = !args.no_region_waves;
  c.dry_run = args.dry_run;
  return c;
}

ExampleInputs example_inputs() {
  std::vector<int64_t> toks{1, 17, 42, 99, 7, 3, 250, 12}, pos{0, 1, 2, 3, 4, 5, 6, 7};
  return {Tensor::from_vector_i64(toks, {1, 8}), Tensor::from_vector_i64(pos, {1, 8}),
          Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({8}, {1, 1})};
}

namespace {

// `v` with `decimals` digits after the point, as printf's %.<decimals>f.
std::string fixed(double v, int decimals) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o << std::fixed << std::setprecision(decimals) << v;
  return o.str();
}

std::string ms(double seconds, int decimals) { return fixed(seconds * 1e3, decimals); }

// "0-3, 6": ascending ranks as runs.
std::string rank_runs(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return s;
}

std::string plural(std::size_t n, const std::string& word) { return word + (n == 1 ? "" : "s"); }

}  // namespace

std::string generation_text(const coord::GenerationReport& g) {
  std::string s = "tokens: ";
  for (std::size_t i = 0; i < g.tokens.size(); ++i) s += (i ? "," : "") + std::to_string(g.tokens[i]);
  s += "\n";
  if (g.tokens_match_single_process)
    s += std::string("  tokens equal the single-process eager result: ") +
         (*g.tokens_match_single_process ? "yes" : "NO") + "\n";
  else
    s += "  not compared with a single-process eager run: the unsharded model does not fit one device\n";
  s += "  time to ready " + ms(g.time_to_ready_s, 1) + " ms, time to first token " + ms(g.time_to_first_token_s, 2) +
       " ms, per-token latency " + ms(g.per_token_s, 2) + " ms\n";
  return s;
}

std::string dry_run_text(const coord::JobReport& r, const std::string& title) {
  const coord::JobInfo& g = r.job;
  std::string s = "== dry run of " + title + ": world " + std::to_string(g.world_size) + ", tp " +
                  std::to_string(g.tp) + ", pp " + std::to_string(g.pp) + ", " + g.mode +
                  "; nothing compiled or written\n";
  int from_store = 0;  // owners reading their store's object (a new entry): neither loaded nor fetched
  int uncached_methods = 0;
  for (const coord::RankReport& rr : r.per_rank)
    for (const coord::RankMethod& m : rr.methods) {
      const MethodReport& x = m.report;
      from_store += !x.hit && !x.remote && x.read_store;
      std::string what = x.hit          ? "load (its own entry)"
                         : x.remote     ? "fetch from the remote"
                         : x.read_store ? "load (the store's object of the same computation, a new entry)"
                         : x.compiled   ? "compile (" + x.reason + ")"
                         : x.fetched    ? (x.owner >= 0 ? "fetch from rank " + std::to_string(x.owner)
                                                        : "fetch from the remote (through its host's reader)")
                                        : "compile (" + x.reason + ")";
      const bool uncached = x.reason.rfind("uncached", 0) == 0;  // nothing would be stored
      uncached_methods += uncached;
      if (uncached && what.find(x.reason) == std::string::npos) what += ", " + x.reason;
      s += "  rank " + std::to_string(rr.rank) + " " + x.method + ": " + what + "\n";
    }
  const bool warm = r.compiled == 0;
  s += "  predicted         " + std::to_string(r.loaded) + " loaded, " + std::to_string(from_store) +
       " read from the store, " + std::to_string(r.fetched) + " fetched, " + std::to_string(r.remote_reads) +
       " read from the remote, " + std::to_string(r.compiled) + " compiled of " + std::to_string(r.rank_methods()) +
       " rank-methods: " + (warm ? "the job would start warm" : "the job would compile") + "\n";
  if (uncached_methods > 0)
    s += "  uncached          " + std::to_string(uncached_methods) +
         " rank-methods would run uncached (a cache that cannot be used): nothing would be stored\n";
  return s;
}

std::string job_report_text(const coord::JobReport& r, const std::string& title) {
  const coord::JobInfo& g = r.job;
  std::string s = "== " + title + ": world " + std::to_string(g.world_size) + " on " + std::to_string(r.hosts) + " " +
                  plural(static_cast<std::size_t>(r.hosts), "host") + ", tp " + std::to_string(g.tp) + ", pp " +
                  std::to_string(g.pp) + ", " + g.mode + (g.independent ? ", independent" : ", coordinated") + "\n";
  s += "  model             " + g.model + " (" + g.architecture + ", " + std::to_string(g.layers) + " layers, hidden " +
       std::to_string(g.hidden) + "), " + g.weights + " weights\n";
  s += "  unique subgraphs  " + std::to_string(r.unique_subgraphs) + "\n";
  for (const coord::Subgraph& sub : r.subgraphs) {
    const std::string key = sub.graph_key.substr(0, 16);
    if (sub.compiled_by.size() == 1)
      s += "    " + key + "  compiled by rank " + std::to_string(sub.compiled_by[0]) + " in " +
           ms(sub.compile_cpu_s, 1) + " ms CPU\n";
    else if (sub.compiled_by.size() > 1)
      s += "    " + key + "  compiled by " + std::to_string(sub.compiled_by.size()) + " ranks (" +
           rank_runs(sub.compiled_by) + ") in " + ms(sub.compile_cpu_s, 1) + " ms CPU summed\n";
  }
  s += "  compiles          " + std::to_string(r.compiled) + " (compile CPU " + ms(r.compile_cpu_s, 1) +
       " ms summed over ranks)\n";
  s += "  tuning            " + std::to_string(r.kernels_tuned) + " kernels tuned, " +
       std::to_string(r.kernels_reused) + " reused from the tuning table\n";
  if (r.regions_compiled + r.regions_reused + r.regions_copied > 0)
    s += "  regions           " + std::to_string(r.regions_compiled) + " compiled, " +
         std::to_string(r.regions_reused) + " taken compiled from the store (" + std::to_string(r.regions_waited) +
         " after waiting for the rank compiling it), " + std::to_string(r.regions_copied) +
         " copied into other stores of the job\n";
  const coord::Captures& c = r.captures;
  if (c.recorded + c.restored + c.recaptured > 0)
    s += "  captures          " + std::to_string(c.recorded) + " recorded, " + std::to_string(c.restored) +
         " restored from templates, " + std::to_string(c.recaptured) + " stored templates not usable\n";
  if (const coord::LaterCalls& l = r.later; l.total() > 0)
    s += "  new shapes        " + std::to_string(l.compiled) + " compiled, " + std::to_string(l.loaded) +
         " loaded from another rank's compile, " + std::to_string(l.waited_then_compiled) +
         " compiled after waiting, " + std::to_string(l.stored) + " stored (later calls; longest wait " +
         ms(l.max_wait_s, 1) + " ms)\n";
  s += "  warm              " + std::to_string(r.warm) + " of " + std::to_string(r.rank_methods()) +
       " rank-methods (served without a compile in this job)\n";
  s += "  served            " + std::to_string(r.loaded) + " hit_local, " + std::to_string(r.hit_remote) +
       " hit_remote, " + std::to_string(r.reused_other_layout) + " reused_other_layout, " + std::to_string(r.received) +
       " received, " + std::to_string(r.compiled) + " compiled\n";
  if (!r.misses.empty()) {  // not fully warm: why, in one line
    std::string causes;
    for (const auto& [cause, n] : r.misses) causes += (causes.empty() ? "" : ", ") + std::to_string(n) + " " + cause;
    s += "  misses            " + causes + "; npucache explain " + g.cache_dir + "\n";
  }
  s += "  fetched           " + std::to_string(r.fetched) + " artifacts, " + std::to_string(r.bytes_exchanged) +
       " bytes exchanged in " + ms(r.exchange_s, 2) + " ms (" + fixed(r.exchange_gbps(), 3) + " GB/s)\n";
  if (r.remote_reads > 0)
    s += "  remote cache      " + std::to_string(r.remote_reads) + " artifacts read, " +
         std::to_string(r.remote_bytes_read) + " bytes\n";
  if (r.hosts > 1)
    s += "  between hosts     " + std::to_string(r.bytes_between_hosts) +
         " bytes (a flat broadcast: " + std::to_string(r.flat_bytes_between_hosts) + ")\n";
  // One rank per cache directory and method writes that method's entries
  // to the index: `writers` counts those (rank, method) index writes.
  s += "  persist           " + ms(r.persist_s, 2) + " ms, " + std::to_string(r.entries_written) +
       " entries written to the index in " + std::to_string(r.writers) + " " +
       plural(static_cast<std::size_t>(r.writers), "write") + " (one rank per cache directory and method)\n";
  s += "  wall              " + ms(g.wall_s, 1) + " ms (start of cache work to every rank ready)\n";
  s += "  peak RSS          " + fixed(static_cast<double>(r.max_peak_rss_bytes) / (1 << 20), 1) +
       " MiB (the largest of any rank)\n";
  return s;
}

void report_job(const Job& job, const std::string& title, double wall_s,
                std::optional<coord::GenerationReport> generation) {
  const auto& c = job.config;
  coord::JobInfo info;
  info.model = c.name;
  info.architecture = c.architecture;
  info.layers = c.layers;
  info.hidden = c.hidden;
  info.weights = job.model->weights() == models::Weights::meta ? "meta" : "deterministic";
  info.world_size = job.world();
  info.tp = job.args.tp;
  info.pp = job.args.pp;
  info.backend = job.args.backend;
  info.mode = effective_mode(job.args);
  info.dynamic = job.args.dynamic;
  info.independent = job.args.independent;
  info.flat_exchange = job.args.flat_exchange;
  info.wall_s = wall_s;
  info.cache_dir = job.args.cache_dir.empty() ? default_cache_dir() : job.args.cache_dir;
  auto report = coord::gather_job_report(info, coord::local_rank_report(job.rank(), job.captures), job.args.timeout_s);
  if (!report) return;  // not rank 0
  report->generation = std::move(generation);
  report->dry_run = job.args.dry_run;
  std::fputs((job.args.dry_run ? dry_run_text(*report, title) : job_report_text(*report, title)).c_str(), stdout);
  if (!job.args.dry_run) storage::set_job_counters(report->counters);
  if (!job.args.report_json.empty()) {
    // Whole or not at all, through an exclusively created temporary that
    // never follows a link (the report may go to a shared directory).
    try {
      cache::write_file_atomically(job.args.report_json, nlohmann::json(*report).dump(2) + "\n");
    } catch (const std::exception& e) {
      throw Error("could not write the job report " + job.args.report_json + " (" + e.what() + ")");
    }
    std::printf("  report            %s\n", job.args.report_json.c_str());
  }
}

}  // namespace npucache::tools
