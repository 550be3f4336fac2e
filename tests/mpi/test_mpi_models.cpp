// Under mpiexec: tiny-llama generation sharded over tp x pp ranks gives the
// tokens and logits of the unsharded model in one process, also with an
// uneven layer split served from a cache that meta-weight models compiled
// (the warmup -> infer flow).
#include <npucache/coordinator.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/mpi.h>

#include <gtest/gtest.h>

#include "mpi/comm.h"
#include "support/logits.h"
#include "support/temp_dir_test.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

using namespace npucache;

namespace {

struct Layout {
  int tp, pp;
};

// The layouts a world of this size can run.
std::vector<Layout> layouts_for(int world) {
  std::vector<Layout> out;
  for (Layout l : {Layout{1, 1}, Layout{2, 1}, Layout{1, 2}, Layout{2, 2}, Layout{1, 4}, Layout{2, 4}})
    if (world % (l.tp * l.pp) == 0) out.push_back(l);
  return out;
}

const std::vector<int64_t> kPrompt{11, 3, 250, 7, 64, 9, 1};
constexpr int kNewTokens = 6;

}  // namespace

TEST(MpiModels, ShardedGenerationEqualsSingleProcess) {
  const int world = MpiSession::world_size();
  set_current_device(MpiSession::world_rank() % Platform::get().device_count());
  auto local = make_single_process_communicator();
  models::TinyLlama reference_model({}, {});
  auto reference = models::greedy_generate(reference_model, kPrompt, kNewTokens, *local);
  for (Layout l : layouts_for(world)) {
    SCOPED_TRACE("tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp));
    auto comm = make_mpi_communicator(l.tp, l.pp);
    models::TinyLlama model({}, models::stage_ranks(*comm));
    auto r = models::greedy_generate(model, kPrompt, kNewTokens, *comm);
    EXPECT_EQ(r.tokens, reference.tokens);
    // EXPECT, never ASSERT: every rank must reach the next collective.
    if (model.last_stage()) {
      EXPECT_EQ(r.logits.size(), reference.logits.size());
      EXPECT_LE(npucache::testing::max_abs_difference(r.logits, reference.logits), 1e-4);
    } else {
      EXPECT_TRUE(r.logits.empty());
    }
  }
}

TEST(MpiModels, GroupsFollowMegatronOrder) {
  const int world = MpiSession::world_size();
  for (Layout l : layouts_for(world)) {
    auto comm = make_mpi_communicator(l.tp, l.pp);
    const int r = comm->global_rank();
    EXPECT_EQ(comm->rank(GroupRole::tp), r % l.tp);
    EXPECT_EQ(comm->rank(GroupRole::pp), (r / l.tp) % l.pp);
    EXPECT_EQ(comm->rank(GroupRole::dp), r / (l.tp * l.pp));
    EXPECT_EQ(comm->size(GroupRole::dp), world / (l.tp * l.pp));
    // A tp all_reduce sums exactly the ranks of this rank's tp group.
    float v = static_cast<float>(r);
    comm->all_reduce_sum(GroupRole::tp, &v, 1);
    float want = 0;
    for (int t = 0; t < l.tp; ++t) want += static_cast<float>(r - r % l.tp + t);
    EXPECT_EQ(v, want);
  }
}

TEST(MpiModels, IndivisibleLayoutIsAClearErrorOnEveryRank) {
  const int world = MpiSession::world_size();
  try {
    make_mpi_communicator(world + 1, 1);
    FAIL() << "tp larger than the world accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide the world size"), std::string::npos) << e.what();
  }
  if (world > 1) {
    auto comm = make_mpi_communicator(1, world);
    if (comm->rank(GroupRole::pp) == world - 1) {
      char b = 0;
      EXPECT_THROW(comm->send(PipelinePeer::next, &b, 1), CommError);
    }
  }
}

// Warmup with meta weights (prepare: trace, compile, cache; no weight
// memory), then inference with real weights served from that cache: every
// rank hits, and the tokens and logits are the single-process ones. Five
// layers: pp = 2 and 4 split them unevenly (3 + 2, 2 + 1 + 1 + 1).
TEST(MpiModels, MetaWarmupThenCachedInferenceWithUnevenLayers) {
  const int world = MpiSession::world_size();
  set_current_device(MpiSession::world_rank() % Platform::get().device_count());
  models::DecoderConfig c;
  c.layers = 5;
  auto local = make_single_process_communicator();
  models::Decoder reference_model(c, {});
  const auto reference = models::greedy_generate(reference_model, kPrompt, kNewTokens, *local);
  // Rank 0's temporary directory, the same one on every rank.
  std::optional<testing_support::TempDir> temp;
  std::string dir;
  if (MpiSession::world_rank() == 0) {
    temp.emplace("meta-warmup", testing_support::current_test_name());
    dir = (temp->path() / "cache").string();  // not created: the caches make it
  }
  mpi::Comm::world().broadcast(dir, 0, {"test helper", 60});
  CacheOptions o;
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 2;
  o.compile.config->autotune_min_time_us = 0;
  for (Layout l : layouts_for(world)) {
    SCOPED_TRACE("tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp));
    auto comm = make_mpi_communicator(l.tp, l.pp);
    set_current_communicator(comm.get());
    o.cache_dir = dir + "/tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp);
    {
      models::Decoder meta(c, models::stage_ranks(*comm), models::Weights::meta);
      auto prompt = dist::cache_compile(meta, &models::Decoder::prompt, o);
      auto decode = dist::cache_compile(meta, &models::Decoder::decode, o);
      auto kv = meta.make_kv_cache(1);
      prompt.prepare(Tensor::from_vector_i64({1, 2, 3}, {1, 3}), Tensor::from_vector_i64({0, 1, 2}, {1, 3}), kv);
      decode.prepare(Tensor::from_vector_i64({4}, {1, 1}), Tensor::from_vector_i64({3}, {1, 1}), kv);
      EXPECT_TRUE(prompt.status().cached);
    }
    models::Decoder model(c, models::stage_ranks(*comm));
    auto prompt = dist::cache_compile(model, &models::Decoder::prompt, o);
    auto decode = dist::cache_compile(model, &models::Decoder::decode, o);
    auto r = models::greedy_generate(
        model, kPrompt, kNewTokens, *comm,
        [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return prompt(t, p, kv); },
        [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return decode(t, p, kv); });
    EXPECT_EQ(prompt.status().outcome, Outcome::hit) << prompt.status().reason;
    EXPECT_EQ(decode.status().outcome, Outcome::hit) << decode.status().reason;
    EXPECT_EQ(r.tokens, reference.tokens);
    if (model.last_stage()) {
      EXPECT_LE(npucache::testing::max_abs_difference(r.logits, reference.logits), 1e-4);
    }
    set_current_communicator(nullptr);
  }
  mpi::Comm::world().barrier({"test helper", 60});
  temp.reset();
}
