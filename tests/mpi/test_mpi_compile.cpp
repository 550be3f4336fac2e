// Under mpiexec (4 ranks: tp=2 x pp=2): compiled generation, in both modes,
// gives the tokens and logits of eager generation; collectives and pipeline
// send/recv run as program steps.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>

#include <gtest/gtest.h>

#include "support/logits.h"

#include <algorithm>
#include <cmath>

using namespace npucache;

namespace {
const std::vector<int64_t> kPrompt{5, 77, 190, 3, 41};
constexpr int kTokens = 6;
}  // namespace

TEST(MpiCompile, CompiledGenerationEqualsEagerTp2Pp2) {
  const int world = MpiSession::world_size();
  if (world % 4 != 0) GTEST_SKIP() << "needs a multiple of 4 ranks (tp=2 x pp=2); run with -n 4";
  set_current_device(MpiSession::world_rank() % Platform::get().device_count());
  auto comm = make_mpi_communicator(2, 2);
  models::TinyLlama model({}, models::stage_ranks(*comm));
  auto eager = models::greedy_generate(model, kPrompt, kTokens, *comm);
  for (CompileMode mode : {CompileMode::max_autotune, CompileMode::reduce_overhead})
    for (bool dynamic : {true, false}) {
      SCOPED_TRACE(std::string(compile_mode_name(mode)) + (dynamic ? " dynamic" : " static"));
      CompileOptions o;
      o.config = CompilerConfig{};
      o.config->mode = mode;
      o.config->autotune_candidates = 2;
      o.config->autotune_min_time_us = 0;
      o.dynamic = dynamic;
      o.method_name = "prompt";
      auto prompt = compile(model, &models::TinyLlama::prompt, o);
      o.method_name = "decode";
      auto decode = compile(model, &models::TinyLlama::decode, o);
      auto r = models::greedy_generate(
          model, kPrompt, kTokens, *comm,
          [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return prompt(t, p, kv); },
          [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return decode(t, p, kv); });
      // EXPECT, never ASSERT: every rank must reach the next collective.
      EXPECT_EQ(r.tokens, eager.tokens);
      EXPECT_EQ(r.logits.size(), eager.logits.size());
      EXPECT_LE(npucache::testing::max_abs_difference(r.logits, eager.logits), 1e-4);
      EXPECT_EQ(prompt.compiles(), 1u);
      EXPECT_EQ(decode.compiles(), 1u);
    }
}
