// Shared set-up of the multi-rank jobs (warmup, infer): MPI, the
// communicator, the rank's device and model, the cached methods.
#pragma once

#include <npucache/compile.h>
#include <npucache/coordinator.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace npucache::tools {

struct JobArgs {
  // tiny-llama, a shipped config name (llama-3-8b...) or a config.json path.
  std::string model = "tiny-llama";
  int tp = 1, pp = 1;
  std::string cache_dir;
  std::string mode = "max-autotune";
  bool ge_cache = false;
  bool independent = false;
  std::string report_json;
  double timeout_s = 120;
  int tokens = 16;
  int autotune_candidates = 8;
  std::string size = "small";  // tiny-llama config: small (default) or large
  int64_t max_seq = 0;         // caps the KV-cache length (0: the config's)
};

// Registers the options shared by warmup and infer.
void add_job_options(CLI::App* cmd, JobArgs& a);

// A rank of a job: warmup builds the model with meta weights (it traces,
// compiles and caches; no weight memory), infer with real ones (an
// OutOfMemoryError naming the memory needed when a stage does not fit).
struct Job {
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
};

// The model config of --model, --size and --max-seq; ConfigError for an
// unknown model, a config.json it cannot use, or --size with another model.
models::DecoderConfig model_config(const JobArgs& a);

// Example inputs of the warmup (prompt of 8 tokens, one decode step).
struct ExampleInputs {
  Tensor tokens, positions, token, position;
};
ExampleInputs example_inputs();

// Gathers every rank's method reports at rank 0, prints the table and
// writes the JSON report there (§4 of the design).
void report_job(Job& job, const std::string& title, double wall_s, const std::string& extra_json);

}  // namespace npucache::tools
