#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/module.h>

#include <gtest/gtest.h>

using namespace npucache;

TEST(Module, NamesFollowRegistrationOrder) {
  models::SeedExample m;
  std::vector<std::string> names;
  for (const auto& [n, t] : m.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"}));
  EXPECT_EQ(m.type_name(), "Model");
  models::SimpleMLP mlp;
  EXPECT_EQ(mlp.type_name(), "npucache::models::SimpleMLP");  // fully qualified
}

TEST(Module, TinyLlamaStageOwnsItsLayers) {
  models::TinyLlamaConfig c;
  models::TinyLlama mid(c, {1, 4, 0, 2});
  std::vector<std::string> names;
  for (const auto& [n, t] : mid.named_parameters()) names.push_back(n);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "layers.2.attn_norm.weight");
  for (const auto& n : names) EXPECT_EQ(n.rfind("layers.2.", 0), 0u) << n;
}

TEST(Module, DuplicateAndInvalidNamesAreErrors) {
  struct M : nn::Module {
    void add(const std::string& n) { register_parameter(n, Tensor::from_vector({1}, {1})); }
  } m;
  m.add("w");
  EXPECT_THROW(m.add("w"), ConfigError);
  EXPECT_THROW(m.add("a.b"), ConfigError);
  EXPECT_THROW(m.add(""), ConfigError);
}

TEST(Layers, TensorParallelShapesAndDivisibility) {
  nn::ColumnParallelLinear col(64, 128, 2);
  EXPECT_EQ(col.weight.dims(), (std::vector<int64_t>{64, 64}));
  nn::RowParallelLinear row(128, 64, 4);
  EXPECT_EQ(row.weight.dims(), (std::vector<int64_t>{64, 32}));
  nn::VocabParallelEmbedding emb(256, 32, 2);
  EXPECT_EQ(emb.weight.dims(), (std::vector<int64_t>{128, 32}));
  EXPECT_THROW(nn::ColumnParallelLinear(64, 100, 3), ConfigError);
}

TEST(Layers, LayerNormAndEmbeddingEager) {
  nn::LayerNorm ln(4);
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4});
  auto y = ln.forward(x).to_vector();
  double mean = 0;
  for (float v : y) mean += v;
  EXPECT_NEAR(mean, 0.0, 1e-5);
  EXPECT_NEAR(y[0], -1.3416, 1e-3);
  nn::Embedding e(3, 2);
  e.weight.copy_from({0, 1, 2, 3, 4, 5});
  auto rows = e.forward(Tensor::from_vector_i64({2, 0, 7}, {3})).to_vector();
  EXPECT_EQ(rows, (std::vector<float>{4, 5, 0, 1, 0, 0}));  // out-of-range id -> zeros
}
