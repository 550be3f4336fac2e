// `npucache generate`: eager greedy generation of a decoder (tiny-llama by
// default, or --model) on the simulated NPU, under mpirun for tp x pp > 1.
// Rank 0 prints the tokens and timing.
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>

#include "tools/commands.h"
#include "tools/job_setup.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <numeric>

namespace npucache::tools {
namespace {

int g_exit_code = 0;

struct GenerateArgs {
  std::string model = "tiny-llama";
  std::string size = "small";
  int tp = 1, pp = 1, tokens = 16;
  std::string timeout = "120";
  std::vector<int64_t> prompt{1, 17, 42, 99, 7, 3, 250, 12};
};

void run_generate(const GenerateArgs& a) {
  const double timeout_s = parse_timeout(a.timeout);
  // Before MPI: an unknown model or a config.json it cannot use is one
  // error, not one per rank.
  const models::DecoderConfig config = sized_model(a.model, a.size);
  int argc = 0;
  char** argv = nullptr;
  MpiSession mpi(&argc, &argv, timeout_s);
  // Every option decides the model, its groups or the number of steps, so
  // ranks must agree on all of them.
  agree_job("generate",
            {{"--model", a.model},
             {"--size", a.size},
             {"model config", config_hash(config)},
             {"--tp", std::to_string(a.tp)},
             {"--pp", std::to_string(a.pp)},
             {"--tokens", std::to_string(a.tokens)},
             {"--timeout", a.timeout}},
            timeout_s);
  auto comm = make_mpi_communicator(a.tp, a.pp, timeout_s);
  // An error unwinding a multi-rank job (about to be aborted) leaves the
  // communicator alive: stream workers may still be in its collectives.
  struct KeepOnError {
    std::unique_ptr<Communicator>& c;
    ~KeepOnError() {
      if (std::uncaught_exceptions() > 0 && MpiSession::world_size() > 1) (void)c.release();
    }
  } keep{comm};
  const int rank = comm->global_rank();
  set_current_device(rank % Platform::get().device_count());
  auto t0 = std::chrono::steady_clock::now();
  models::Decoder model(config, models::stage_ranks(*comm));
  double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto r = models::greedy_generate(model, a.prompt, a.tokens, *comm);
  if (rank == 0) {
    std::printf("%s eager generation: world %d, tp %d, pp %d, device %d of %d\n", config.name.c_str(),
                comm->layout().world_size, a.tp, a.pp, current_device(), Platform::get().device_count());
    std::printf("tokens:");
    for (int64_t t : r.tokens) std::printf(" %lld", static_cast<long long>(t));
    double mean = r.token_latency_s.empty() ? 0.0
                                            : std::accumulate(r.token_latency_s.begin(), r.token_latency_s.end(), 0.0) /
                                                  static_cast<double>(r.token_latency_s.size());
    std::printf("\nmodel build %.1f ms, time to first token %.2f ms, per-token latency %.2f ms\n", build_s * 1e3,
                r.time_to_first_token_s * 1e3, mean * 1e3);
  }
}

}  // namespace

int exit_code() { return g_exit_code; }
void set_exit_code(int code) { g_exit_code = code; }

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "eager greedy generation of a decoder (use mpirun for tp*pp > 1)");
  cmd->add_option("--model", args->model, "tiny-llama (default), tiny-llama-large, a shipped config or a config.json");
  add_size_option(cmd, args->size);
  cmd->add_option("--tp", args->tp, "tensor-parallel size")->check(positive_integer());
  cmd->add_option("--pp", args->pp, "pipeline-parallel size")->check(positive_integer());
  cmd->add_option("--tokens", args->tokens, "tokens to generate")->check(positive_integer());
  cmd->add_option("--timeout", args->timeout, "seconds any collective may take (a positive number; default 120)");
  cmd->callback([args] { guarded([&] { run_generate(*args); }); });
}

}  // namespace npucache::tools
