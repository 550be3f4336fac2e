// Shared set-up of the multi-rank jobs (warmup, infer): MPI, the
// communicator, the rank's device and model, the cached methods.
#pragma once

#include <npucache/compile.h>
#include <npucache/coordinator.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>

#include "coord/job_report.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npucache::tools {

struct JobArgs {
  std::string command;  // warmup or infer
  // tiny-llama, a shipped config name (llama-3-8b...) or a config.json path.
  std::string model = "tiny-llama";
  int tp = 1, pp = 1;
  std::string cache_dir;
  // npu (default): TorchAir's CompilerConfig, --mode max-autotune or
  // reduce-overhead; inductor or npugraphs: torch.compile's surface, --mode
  // one of inductor's modes (docs/GUIDE.md, "The compile surface").
  std::string backend = "npu";
  std::string mode;              // "" : the backend's default
  std::string dynamic = "true";  // true, false or auto (automatic dynamic)
  bool ge_cache = false;
  bool no_regions = false;  // trace the decoder's layers inline (CompileOptions::regions)
  bool independent = false;
  bool flat_exchange = false;
  bool no_region_waves = false;  // CoordinatorOptions::region_waves off
  std::string report_json;
  std::string timeout = "120";  // validated by parse_timeout
  double timeout_s = 120;
  int tokens = 16;
  int autotune_candidates = 8;
  std::string size = "small";  // tiny-llama config: small (default) or large
  int64_t max_seq = 0;         // caps the KV-cache length (0: the config's)
  bool check_only = false;     // --check-args: validate, start nothing
  // --dry-run: meta weights, every rank-method's keys looked up and
  // planned, nothing compiled or written; the report predicts the outcomes.
  bool dry_run = false;
  std::string remote;  // --remote URL (default: $NPUCACHE_REMOTE)
  bool remote_read_only = false;
  std::string signing_key;        // --signing-key FILE (default: $NPUCACHE_REMOTE_SIGNING_KEY)
  std::string trusted_keys;       // --trusted-keys FILE (default: $NPUCACHE_REMOTE_TRUSTED_KEYS)
  std::string progress = "auto";  // rank 0's progress line: auto, always, never
};

// The mode as given, or the backend's default ("max-autotune" for npu,
// "default" for inductor, "" for npugraphs).
std::string effective_mode(const JobArgs& a);

// Registers the options shared by warmup and infer.
void add_job_options(CLI::App* cmd, JobArgs& a);

// Validates the arguments without MPI (mode, timeout, model config against
// tp/pp; with --check-args also the report path): ConfigError naming the
// argument. Sets a.timeout_s; returns the model config.
models::DecoderConfig check_args(JobArgs& a);

// The remote options of --remote, --remote-read-only, --signing-key and
// --trusted-keys.
RemoteOptions remote_options(const JobArgs& a);

// --timeout: a positive, finite number of seconds; ConfigError (exit 2,
// before MPI starts) for anything else.
double parse_timeout(const std::string& text);

// A hash of every field of a model config, for the job identity: ranks
// given different configs (another config.json, --max-seq) differ in it.
std::string config_hash(const models::DecoderConfig& c);

// Runs the job identity handshake of the subcommand `command` with `fields`
// (the options every rank must share) over MPI_COMM_WORLD.
void agree_job(const std::string& command, const std::vector<std::pair<std::string, std::string>>& fields,
               double timeout_s);

// Runs `f`, a multi-rank job: an error is printed with the rank; an error
// every rank agreed on (different settings) ends MPI normally with exit
// status 2; any other error aborts the job (MPI_Abort) so no rank is left
// waiting, after a moment that lets the other ranks print theirs.
void guarded(const std::function<void()>& f);

// A rank of a job: warmup builds the model with meta weights (it traces,
// compiles and caches; no weight memory), infer with real ones (an
// OutOfMemoryError naming the memory needed when a stage does not fit).
struct Job {
  // Validates the arguments (before MPI starts), starts MPI, runs the job
  // identity handshake, then makes the communicator and the model.
  Job(const JobArgs& a, models::Weights weights);
  ~Job();
  JobArgs args;
  models::DecoderConfig config;
  std::unique_ptr<MpiSession> mpi;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<models::Decoder> model;
  CacheOptions cache_options(const std::string& method) const;
  dist::CoordinatorOptions coordinator() const;
  int rank() const { return comm->global_rank(); }
  int world() const { return comm->layout().world_size; }
  // This rank's captures (reduce-overhead), from the methods' statuses:
  // recorded here, restored from stored templates, stored templates not
  // usable (the job report sums them over the ranks).
  coord::Captures captures;
  template <class... S>
  void note_captures(const S&... statuses) {
    captures.recorded = (statuses.recorded + ... + 0);
    captures.restored = (statuses.restored + ... + 0);
    captures.recaptured = (statuses.recaptured + ... + 0);
  }
};

// The model config of --model, --size and --max-seq; ConfigError for an
// unknown model, a config.json it cannot use, or --size with another model.
models::DecoderConfig model_config(const JobArgs& a);

// The sizes of tiny-llama that --size takes (small, large), and the option
// itself (warmup, infer and generate): a word that is not one of them is a
// usage error listing them.
const std::vector<std::string>& model_sizes();
void add_size_option(CLI::App* cmd, std::string& size);
// The config of `model` at `size`; ConfigError for an unknown model or
// --size other than small with a model other than tiny-llama.
models::DecoderConfig sized_model(const std::string& model, const std::string& size);

// Example inputs of the warmup (prompt of 8 tokens, one decode step).
struct ExampleInputs {
  Tensor tokens, positions, token, position;
};
ExampleInputs example_inputs();

// The lines of an infer job's generation (rank 0 prints them as soon as it
// has them): the tokens, whether they equal the single-process eager
// result, the latencies.
std::string generation_text(const coord::GenerationReport& g);

// A dry run's lines at rank 0: per rank-method what a real run would do
// (load, read its store, fetch from rank N or the remote, compile and why),
// then whether the job would start warm.
std::string dry_run_text(const coord::JobReport& r, const std::string& title);

// The job report's table, as the job prints it at rank 0.
std::string job_report_text(const coord::JobReport& r, const std::string& title);

// Gathers every rank's report at rank 0 (coord::gather_job_report), which
// prints its table and writes it as JSON to --report-json (§4 of the
// design). `wall_s`: start of the cache work to every rank ready;
// `generation`: what an infer job generated (rank 0's).
void report_job(const Job& job, const std::string& title, double wall_s,
                std::optional<coord::GenerationReport> generation = std::nullopt);

}  // namespace npucache::tools
