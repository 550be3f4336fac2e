// Eager execution of ops (kernels on the simulated device) against plain
// host computations.
#include <npucache/error.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

#include <cmath>

using namespace npucache;

namespace {
void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol = 1e-5f) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "at " << i;
}
}  // namespace

TEST(Eager, ArithmeticWithBroadcastAndScalars) {
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector({10, 20, 30}, {3});
  expect_near((a + b).to_vector(), {11, 22, 33, 14, 25, 36});
  expect_near((a * 2.0 - 1.0).to_vector(), {1, 3, 5, 7, 9, 11});
  expect_near(ops::maximum(a, ops::scalar(3.5)).to_vector(), {3.5, 3.5, 3.5, 4, 5, 6});
  auto mask = ops::gt(a, ops::scalar(3)).to(DType::f32).to_vector();
  expect_near(mask, {0, 0, 0, 1, 1, 1});
}

TEST(Eager, CompositeOpsRunTheirDecomposition) {
  std::vector<float> xs{-2, -0.5, 0, 0.5, 2, 3};
  Tensor x = Tensor::from_vector(xs, {2, 3});
  std::vector<float> silu, gelu;
  for (float v : xs) {
    silu.push_back(v / (1 + std::exp(-v)));
    gelu.push_back(0.5f * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  expect_near(ops::silu(x).to_vector(), silu);
  expect_near(ops::gelu(x).to_vector(), gelu);
  Tensor w = Tensor::from_vector({1, 2, 3}, {3});
  auto rms = ops::rmsnorm(x, w, 1e-6).to_vector();
  float r0 = 1.0f / std::sqrt((4 + 0.25f + 0) / 3 + 1e-6f);
  expect_near({rms[0], rms[1]}, {-2 * r0, -0.5f * 2 * r0});
  Tensor lw = Tensor::from_vector({2, 3, 4, 5}, {2, 2});
  Tensor lx = Tensor::from_vector({1, 1}, {1, 2});
  expect_near(ops::linear(lx, lw, Tensor::from_vector({1, -1}, {2})).to_vector(), {6, 8});
}

TEST(Eager, CausalAttentionMatchesReference) {
  // B=1, H=1, S=3, D=2; with positions equal to the aligned causal mask.
  std::vector<float> q{1, 0, 0, 1, 1, 1}, k{1, 0, 0, 1, 1, 1}, v{1, 2, 3, 4, 5, 6};
  Tensor Q = Tensor::from_vector(q, {1, 1, 3, 2}), K = Tensor::from_vector(k, {1, 1, 3, 2}),
         V = Tensor::from_vector(v, {1, 1, 3, 2});
  auto aligned = ops::attention(Q, K, V, true).to_vector();
  auto by_pos = ops::attention(Q, K, V, true, Tensor::from_vector_i64({0, 1, 2}, {1, 3})).to_vector();
  expect_near(aligned, by_pos);
  // Reference: row i attends keys 0..i with scale 1/sqrt(2).
  std::vector<float> ref;
  for (int i = 0; i < 3; ++i) {
    std::vector<double> s;
    double m = -1e30, z = 0;
    for (int j = 0; j <= i; ++j) {
      s.push_back((q[i * 2] * k[j * 2] + q[i * 2 + 1] * k[j * 2 + 1]) / std::sqrt(2.0));
      m = std::max(m, s.back());
    }
    for (auto& e : s) z += (e = std::exp(e - m));
    for (int d = 0; d < 2; ++d) {
      double o = 0;
      for (int j = 0; j <= i; ++j) o += s[static_cast<std::size_t>(j)] / z * v[static_cast<std::size_t>(j * 2 + d)];
      ref.push_back(static_cast<float>(o));
    }
  }
  expect_near(aligned, ref);
  // Grouped KV heads: 2 query heads share 1 kv head = the same as repeating it.
  Tensor Q2 = ops::concat({Q, Q}, 1);
  auto grouped = ops::attention(Q2, K, V, true).to_vector();
  auto repeated = ops::attention(Q2, ops::concat({K, K}, 1), ops::concat({V, V}, 1), true).to_vector();
  expect_near(grouped, repeated);
}

TEST(Eager, KvCacheUpdateIsInPlace) {
  Tensor cache = Tensor::from_vector(std::vector<float>(8, 0.0f), {1, 4, 1, 2});
  Tensor vals = Tensor::from_vector({1, 2, 3, 4}, {1, 2, 1, 2});
  Tensor out = ops::buffer_update(cache, Tensor::from_vector_i64({3, 1}, {1, 2}), vals);
  expect_near(cache.to_vector(), {0, 0, 3, 4, 0, 0, 1, 2});
  expect_near(out.to_vector(), cache.to_vector());
  Tensor bad = ops::buffer_update(cache, Tensor::from_vector_i64({9, 1}, {1, 2}), vals);
  EXPECT_THROW(bad.to_vector(), DeviceError);  // asynchronous error surfaces at sync
}

TEST(Eager, HalfPrecisionStoredComputedInF32) {
  Tensor a = Tensor::from_vector({1.5f, -2.25f, 1000.0f}, {3}, DType::f16);
  Tensor b = Tensor::from_vector({0.5f, 0.25f, 24.0f}, {3}, DType::f16);
  expect_near((a + b).to_vector(), {2.0f, -2.0f, 1024.0f});
  Tensor c = Tensor::from_vector({1.0f, 3.0f}, {2}, DType::bf16);
  expect_near((c * c).to_vector(), {1.0f, 9.0f});
  expect_near(Tensor::from_vector({1e-6f}, {1}, DType::f16).to_vector(), {1e-6f}, 1e-7f);
}

TEST(Eager, BadOperandsAreClearErrors) {
  Tensor a = Tensor::from_vector({1, 2, 3}, {3});
  Tensor i = Tensor::from_vector_i64({1, 2, 3}, {3});
  EXPECT_THROW(a + i, ShapeError);
  EXPECT_THROW(ops::matmul(a, a), ShapeError);
  EXPECT_THROW(ops::add(a, Tensor()), ShapeError);
  EXPECT_THROW(ops::dropout(a, 1.5), ConfigError);
}
