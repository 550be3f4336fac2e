// `npucache warmup` and `npucache infer`: the multi-rank jobs, run under
// mpirun (launch/warmup.sh, launch/infer.sh).
#include <npucache/device.h>
#include <npucache/error.h>

#include "mpi/comm.h"
#include "tools/commands.h"
#include "tools/job_setup.h"

#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <utility>

namespace npucache::tools {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The job's two cached methods; the first call of each runs the coordinator.
auto cached_methods(Job& job) {
  return std::make_pair(
      dist::cache_compile(*job.model, &models::Decoder::prompt, job.cache_options("prompt"), job.coordinator()),
      dist::cache_compile(*job.model, &models::Decoder::decode, job.cache_options("decode"), job.coordinator()));
}

// Loads or compiles both methods for the example inputs (with a scratch KV
// cache), then waits for every rank. A model with real weights runs them
// once; one with meta weights only prepares them (trace, compile, cache).
template <class Methods>
void get_ready(Job& job, Methods& m) {
  ExampleInputs in = example_inputs();
  auto scratch = job.model->make_kv_cache(1);
  if (job.model->weights() == models::Weights::meta) {
    m.first.prepare(in.tokens, in.positions, scratch);
    m.second.prepare(in.token, in.position, scratch);
  } else {
    m.first(in.tokens, in.positions, scratch);
    m.second(in.token, in.position, scratch);
    Platform::get().device(current_device()).synchronize();
  }
  mpi::Comm::world().barrier({"waiting for every rank to be ready", job.args.timeout_s});
}

// A dry run of either job: both methods predicted (each call ends with
// DryRunEnd), the prediction reported; meta weights, nothing written.
void run_dry(const JobArgs& a) {
  Job job(a, models::Weights::meta);
  mpi::Comm::world().barrier({"starting the job", job.args.timeout_s});
  const auto t0 = Clock::now();
  auto [prompt, decode] = cached_methods(job);
  ExampleInputs in = example_inputs();
  auto scratch = job.model->make_kv_cache(1);
  try {
    prompt.prepare(in.tokens, in.positions, scratch);
  } catch (const dist::DryRunEnd&) {
  }
  try {
    decode.prepare(in.token, in.position, scratch);
  } catch (const dist::DryRunEnd&) {
  }
  report_job(job, a.command, since(t0));
}

void run_warmup(const JobArgs& a) {
  Job job(a, models::Weights::meta);
  mpi::Comm::world().barrier({"starting the job", job.args.timeout_s});
  const auto t0 = Clock::now();
  auto methods = cached_methods(job);
  get_ready(job, methods);
  job.note_captures(methods.first.status(), methods.second.status());
  report_job(job, "warmup", since(t0));
}

// Whether the unsharded model fits one device, so rank 0 can check the
// job's tokens against a single-process eager run.
bool reference_fits(const models::DecoderConfig& c) {
  const Device& dev = Platform::get().device(current_device());
  return models::stage_memory(c, {}).total() + dev.memory_stats().allocated <= dev.properties().memory_capacity;
}

void run_infer(const JobArgs& a) {
  Job job(a, models::Weights::deterministic);
  mpi::Comm::world().barrier({"starting the job", job.args.timeout_s});
  const auto t0 = Clock::now();
  auto methods = cached_methods(job);
  auto& [prompt, decode] = methods;
  get_ready(job, methods);
  const double ready_s = since(t0);
  const std::vector<int64_t> prompt_tokens{1, 17, 42, 99, 7, 3, 250, 12};
  auto r = models::greedy_generate(
      *job.model, prompt_tokens, a.tokens, *job.comm,
      [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return prompt(t, p, kv); },
      [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return decode(t, p, kv); });
  // The single-process eager result, for comparison, when the whole model
  // fits one device.
  bool match = true;
  const bool compared = job.rank() == 0 && reference_fits(job.config);
  if (compared) {
    auto local = make_single_process_communicator();
    models::Decoder ref(job.config, {});
    match = models::greedy_generate(ref, prompt_tokens, a.tokens, *local).tokens == r.tokens;
  }
  const double per_token = r.token_latency_s.empty()
                               ? 0.0
                               : std::accumulate(r.token_latency_s.begin(), r.token_latency_s.end(), 0.0) /
                                     static_cast<double>(r.token_latency_s.size());
  job.note_captures(prompt.status(), decode.status());
  std::optional<coord::GenerationReport> generation;
  if (job.rank() == 0) {
    generation = coord::GenerationReport{ready_s, r.time_to_first_token_s, per_token, r.tokens,
                                         compared ? std::optional<bool>(match) : std::nullopt};
    std::fputs(generation_text(*generation).c_str(), stdout);
  }
  report_job(job, "infer", ready_s, std::move(generation));
  if (job.rank() == 0 && !match) set_exit_code(1);
}

}  // namespace

void add_job_commands(CLI::App& app) {
  auto warm = std::make_shared<JobArgs>();
  warm->command = "warmup";
  CLI::App* w = app.add_subcommand("warmup", "compile-and-cache job for prompt and decode (run under mpirun)");
  add_job_options(w, *warm);
  w->callback([warm] {
    if (warm->check_only) {
      check_args(*warm);
      return;
    }
    guarded([&] { warm->dry_run ? run_dry(*warm) : run_warmup(*warm); });
  });
  auto inf = std::make_shared<JobArgs>();
  inf->command = "infer";
  CLI::App* i = app.add_subcommand("infer", "multi-card greedy generation using the cache (run under mpirun)");
  add_job_options(i, *inf);
  i->add_option("--tokens", inf->tokens, "tokens to generate")->check(positive_integer());
  i->callback([inf] {
    if (inf->check_only) {
      check_args(*inf);
      return;
    }
    guarded([&] { inf->dry_run ? run_dry(*inf) : run_infer(*inf); });
  });
}

}  // namespace npucache::tools
