// The shipped configs at real shapes, with meta weights (no weight memory):
// the pipeline split, and the unique stage graphs of tp x pp layouts, even
// and uneven, counted as distinct canonical hashes of the traced prompt and
// decode graphs of every rank position.
#include <npucache/error.h>
#include <npucache/ir/hash.h>
#include <npucache/models/models.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <tuple>

using namespace npucache;

namespace {

models::DecoderConfig shipped(const std::string& name) {
  return models::load_hf_config(models::find_shipped_config(name));
}

Hash128 trace_hash(models::Decoder& m, bool decode) {
  const int64_t s = decode ? 1 : 8;
  Tensor tokens = Tensor::from_vector_i64(std::vector<int64_t>(static_cast<std::size_t>(s), 3), {1, s});
  Tensor pos = Tensor::from_vector_i64(std::vector<int64_t>(static_cast<std::size_t>(s), 0), {1, s});
  TraceOptions o;
  o.method_name = decode ? "decode" : "prompt";
  auto method = decode ? &models::Decoder::decode : &models::Decoder::prompt;
  return canonical_hash(trace_method(m, method, o, tokens, pos, m.make_kv_cache(1)).graph);
}

struct Layout {
  int tp, pp;
};

// Distinct graph hashes over every stage (prompt and decode), checking on
// the way that the first and last tp rank of each stage trace equal graphs.
std::size_t unique_graphs(const models::DecoderConfig& c, Layout l) {
  std::set<Hash128> hashes;
  for (int stage = 0; stage < l.pp; ++stage)
    for (bool decode : {false, true}) {
      models::Decoder first_rank(c, {l.tp, l.pp, 0, stage}, models::Weights::meta);
      const Hash128 h = trace_hash(first_rank, decode);
      if (l.tp > 1) {
        models::Decoder last_rank(c, {l.tp, l.pp, l.tp - 1, stage}, models::Weights::meta);
        EXPECT_EQ(h, trace_hash(last_rank, decode)) << c.name << " stage " << stage << " decode " << decode;
      }
      hashes.insert(h);
    }
  return hashes.size();
}

// What the split rule predicts: per method, the distinct (first?, last?,
// layer count) of the stages.
std::size_t predicted(const models::DecoderConfig& c, Layout l) {
  std::set<std::tuple<bool, bool, int64_t>> roles;
  for (int s = 0; s < l.pp; ++s) roles.insert({s == 0, s == l.pp - 1, models::stage_layers(c.layers, l.pp, s).count});
  return 2 * roles.size();
}

}  // namespace

TEST(ModelShapes, UnevenLayersGoToTheFirstStages) {
  using R = std::vector<int64_t>;
  auto counts = [](int64_t layers, int pp) {
    R r;
    int64_t next = 0;
    for (int s = 0; s < pp; ++s) {
      const auto range = models::stage_layers(layers, pp, s);
      EXPECT_EQ(range.first, next);  // contiguous
      next += range.count;
      r.push_back(range.count);
    }
    EXPECT_EQ(next, layers);
    return r;
  };
  EXPECT_EQ(counts(32, 4), (R{8, 8, 8, 8}));
  EXPECT_EQ(counts(32, 3), (R{11, 11, 10}));
  EXPECT_EQ(counts(80, 6), (R{14, 14, 13, 13, 13, 13}));
  EXPECT_EQ(counts(28, 8), (R{4, 4, 4, 4, 3, 3, 3, 3}));
  EXPECT_EQ(counts(4, 4), (R{1, 1, 1, 1}));
  EXPECT_THROW(models::stage_layers(3, 4, 0), ConfigError);
  EXPECT_THROW(models::stage_layers(8, 4, 4), ConfigError);
}

TEST(ModelShapes, ShippedConfigsHaveThePublishedShapes) {
  auto l8 = shipped("llama-3-8b");
  EXPECT_EQ(std::tie(l8.hidden, l8.intermediate, l8.layers, l8.heads, l8.kv_heads, l8.vocab, l8.max_seq),
            std::make_tuple(4096, 14336, 32, 32, 8, 128256, 8192));
  EXPECT_EQ(l8.rope_theta, 500000.0);
  EXPECT_EQ(l8.eps, 1e-5);
  EXPECT_FALSE(l8.qkv_bias || l8.o_bias || l8.tie_word_embeddings);
  auto l70 = shipped("llama-3-70b");
  EXPECT_EQ(std::tie(l70.hidden, l70.intermediate, l70.layers, l70.heads, l70.kv_heads, l70.vocab),
            std::make_tuple(8192, 28672, 80, 64, 8, 128256));
  auto q = shipped("qwen2.5-7b");
  EXPECT_EQ(std::tie(q.hidden, q.intermediate, q.layers, q.heads, q.kv_heads, q.vocab),
            std::make_tuple(3584, 18944, 28, 28, 4, 152064));
  EXPECT_EQ(q.rope_theta, 1e6);
  EXPECT_EQ(q.eps, 1e-6);
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.o_bias || q.tie_word_embeddings);
  EXPECT_EQ(q.architecture, "Qwen2ForCausalLM");
  auto m = shipped("mistral-7b");
  EXPECT_EQ(std::tie(m.hidden, m.intermediate, m.layers, m.heads, m.kv_heads, m.vocab),
            std::make_tuple(4096, 14336, 32, 32, 8, 32000));
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_EQ(m.max_seq, 4096);  // max_position_embeddings 32768 capped by sliding_window 4096
  EXPECT_EQ(m.name, "mistral-7b");
}

// Each shipped config at several layouts, one with an uneven layer split:
// the unique graphs are what the split rule predicts, and the tp ranks of
// a stage trace equal graphs.
TEST(ModelShapes, UniqueStageGraphsOfShippedConfigs) {
  struct Case {
    const char* config;
    Layout layout;
    std::size_t unique;
  };
  const Case cases[] = {
      {"llama-3-8b", {1, 1}, 2},                              // one stage: prompt and decode
      {"llama-3-8b", {2, 2}, 4},                              // first and last
      {"llama-3-8b", {8, 4}, 6},                              // first, middle (2 equal), last
      {"llama-3-8b", {2, 3}, 6},                              // 11, 11, 10: first, middle, last
      {"llama-3-8b", {1, 5}, 8},                              // 7, 7, 6, 6, 6: first, middle of 7, middle of 6, last
      {"llama-3-70b", {8, 4}, 6},                             // 20 each
      {"llama-3-70b", {8, 3}, 6},                             // 27, 27, 26
      {"llama-3-70b", {4, 6}, 8},                             // 14, 14, 13, 13, 13, 13
      {"qwen2.5-7b", {4, 4}, 6},                              // 7 each
      {"qwen2.5-7b", {2, 6}, 8},                              // 5, 5, 4, 4, 4, 4
      {"mistral-7b", {8, 4}, 6},  {"mistral-7b", {2, 5}, 8},  // 7, 7, 6, 6, 6
  };
  for (const Case& c : cases) {
    const auto config = shipped(c.config);
    const std::size_t n = unique_graphs(config, c.layout);
    std::printf("  %-12s tp %d x pp %d: %zu unique stage graphs (prompt + decode)\n", c.config, c.layout.tp,
                c.layout.pp, n);
    EXPECT_EQ(n, predicted(config, c.layout)) << c.config << " tp " << c.layout.tp << " pp " << c.layout.pp;
    EXPECT_EQ(n, c.unique) << c.config << " tp " << c.layout.tp << " pp " << c.layout.pp;
  }
}

TEST(ModelShapes, LayoutsTheShapesDoNotAllowAreErrorsNamingTheField) {
  auto expect_error = [](const models::DecoderConfig& c, models::StageRanks r, const std::string& part) {
    try {
      models::Decoder m(c, r, models::Weights::meta);
      ADD_FAILURE() << "accepted " << c.name << " at tp " << r.tp << " pp " << r.pp;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  // Qwen2.5-7B has 4 kv heads: tp 8 would split a head.
  expect_error(shipped("qwen2.5-7b"), {8, 1, 0, 0}, "num_key_value_heads (4) must be divisible by tp = 8");
  expect_error(shipped("mistral-7b"), {1, 33, 0, 0}, "num_hidden_layers (32) is smaller than pp = 33");
  auto c = shipped("llama-3-8b");
  c.vocab = 1001;
  expect_error(c, {16, 1, 0, 0}, "num_attention_heads (32) and num_key_value_heads (8) must be divisible by tp = 16");
  expect_error(c, {8, 1, 0, 0}, "vocab_size (1001) is not divisible by tp = 8");
}

// Real weights of a stage that does not fit the device: an error naming the
// memory it needs; the same stage with meta weights allocates nothing.
TEST(ModelShapes, RealWeightsThatDoNotFitNameTheMemoryNeeded) {
  const auto c = shipped("llama-3-70b");
  const auto need = models::stage_memory(c, {8, 4, 0, 0});
  // 20 layers of 8192 x (1024 + 128 + 128) + 1024 x 8192 + 3 x 8192 x 3584
  // f32 weights, plus the embedding shard 16032 x 8192 and 40 norms.
  EXPECT_NEAR(static_cast<double>(need.weights),
              20 * 4.0 * (8192 * 2304.0 + 3 * 8192 * 3584.0 + 2 * 8192) + 4.0 * 16032 * 8192, 1e6);
  try {
    models::Decoder m(c, {8, 4, 0, 0});
    FAIL() << "a 70B stage of " << need.total() << " bytes was built with real weights";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("llama-3-70b stage 0 of pp 4 at tp 8 needs 8.62 GiB of device memory to run with real weights "
                       "(8.46 GiB of weights, 160.0 MiB of KV cache)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("NPUCACHE_SIM_DEVICE_MEMORY"), std::string::npos) << msg;
  }
  models::Decoder meta(c, {8, 4, 0, 0}, models::Weights::meta);
  for (const auto& [name, t] : meta.named_parameters()) ASSERT_TRUE(t.is_meta()) << name;
}
