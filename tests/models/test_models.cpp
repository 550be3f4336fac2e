#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

using namespace npucache;

TEST(Models, SeedExampleComputesTheSeedFormula) {
  models::SeedExample m;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), true};
  std::vector<Tensor> kv{Tensor::from_vector({0.5, 0.5, 2, 2}, {2, 2})};
  // linear2(x) + linear2(kv[0]) with ones: (x0 + x1 + 1) + (k0 + k1 + 1)
  EXPECT_EQ(m.prompt(x, kv).to_vector(), (std::vector<float>{6, 13}));
  EXPECT_EQ(m.decode(x, kv).to_vector(), (std::vector<float>{6, 13}));
}

TEST(Models, SimpleMlpShapes) {
  models::SimpleMLP m;
  Tensor x = Tensor::from_vector(std::vector<float>(3 * 128, 0.5f), {3, 128});
  Tensor y = m.forward(x);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{3, 10}));
  auto v = y.to_vector();
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 10), std::vector<float>(v.begin() + 10, v.begin() + 20));
}

TEST(Models, TinyLlamaDecodeWithKvCacheMatchesFullPrompt) {
  models::TinyLlama m({}, {});
  const std::vector<int64_t> seq{5, 9, 200, 31, 77, 18};
  const int64_t S = static_cast<int64_t>(seq.size());
  auto positions = [](int64_t from, int64_t n) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < n; ++i) p.push_back(from + i);
    return p;
  };
  auto kv_full = m.make_kv_cache(1);
  auto full = m.prompt(Tensor::from_vector_i64(seq, {1, S}), Tensor::from_vector_i64(positions(0, S), {1, S}), kv_full)
                  .to_vector();
  auto kv = m.make_kv_cache(1);
  std::vector<int64_t> head(seq.begin(), seq.begin() + 3);
  m.prompt(Tensor::from_vector_i64(head, {1, 3}), Tensor::from_vector_i64(positions(0, 3), {1, 3}), kv);
  const std::size_t V = 256;
  for (int64_t i = 3; i < S; ++i) {
    auto step = m.decode(Tensor::from_vector_i64({seq[static_cast<std::size_t>(i)]}, {1, 1}),
                         Tensor::from_vector_i64({i}, {1, 1}), kv)
                    .to_vector();
    ASSERT_EQ(step.size(), V);
    for (std::size_t v = 0; v < V; ++v)
      ASSERT_NEAR(step[v], full[static_cast<std::size_t>(i) * V + v], 1e-4) << "position " << i;
  }
}

TEST(Models, GreedyGenerationIsDeterministic) {
  models::TinyLlama m({}, {});
  auto comm = make_single_process_communicator();
  auto a = models::greedy_generate(m, {1, 2, 3}, 6, *comm);
  auto b = models::greedy_generate(m, {1, 2, 3}, 6, *comm);
  EXPECT_EQ(a.tokens.size(), 6u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.token_latency_s.size(), 5u);
}

TEST(Models, BadConfigurationsAreClearErrors) {
  models::TinyLlamaConfig c;
  try {
    models::TinyLlama m(c, {1, 5, 0, 0});  // pp = 3 is an uneven split now; 5 stages leave one empty
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_hidden_layers (4) is smaller than pp = 5"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(models::TinyLlama(c, {4, 1, 0, 0}), ConfigError);  // kv_heads 2 over tp 4
  EXPECT_THROW(models::TinyLlama(c, {2, 1, 2, 0}), ConfigError);  // rank outside tp
  models::TinyLlama m(c, {});
  Tensor t = Tensor::from_vector_i64({1}, {1, 1});
  EXPECT_THROW(m.decode(t, t, {}), ConfigError);
  auto comm = make_single_process_communicator();
  EXPECT_THROW(models::greedy_generate(m, {1}, 100, *comm), ConfigError);  // beyond max_seq
  models::TinyLlama stage(c, {1, 2, 0, 0});
  auto kv = stage.make_kv_cache(1);
  Tensor out = stage.prompt(t, t, kv);  // a first stage sends to a peer it does not have
  EXPECT_THROW(out.to_vector(), CommError);
}
