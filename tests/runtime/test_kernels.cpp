// Kernels against plain reference implementations.
#include <npucache/device.h>
#include <npucache/error.h>

#include "runtime/kernels/kernel_util.h"
#include "runtime/launch.h"
#include "runtime/stream.h"
#include "runtime/unary_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace npucache;

namespace {

runtime::TensorArg make(DType t, std::vector<int64_t> dims, const std::vector<double>& values = {}) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  runtime::TensorArg a{Platform::get().device(0).allocate(static_cast<std::size_t>(n) * dtype_size(t)), 0, t, dims};
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
    runtime::kernels::store_from_double(a, i, values[static_cast<std::size_t>(i)]);
  return a;
}

std::vector<double> read(const runtime::TensorArg& a) {
  std::vector<double> v;
  for (int64_t i = 0; i < a.numel(); ++i) v.push_back(runtime::kernels::load_as_double(a, i));
  return v;
}

std::vector<double> random_values(int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(u(g));
  return v;
}

std::vector<double> run(Op op, std::vector<runtime::TensorArg> args, Attrs attrs = {}) {
  runtime::KernelLaunch l;
  l.op = op;
  l.attrs = std::make_shared<const Attrs>(attrs);
  l.args = args;
  runtime::run_kernel(l);
  return read(args.back());
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

}  // namespace

TEST(Kernels, MatmulEveryTilingMatchesReference) {
  const int64_t B = 2, M = 37, K = 53, N = 29;
  auto av = random_values(B * M * K, 1), bv = random_values(K * N, 2);
  std::vector<double> ref(static_cast<std::size_t>(B * M * N), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += av[static_cast<std::size_t>((b * M + i) * K + k)] * bv[static_cast<std::size_t>(k * N + j)];
        ref[static_cast<std::size_t>((b * M + i) * N + j)] = s;
      }
  for (auto [tm, tn, tk] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {0, 0, 0}, {1, 1, 1}, {8, 16, 4}, {32, 256, 128}, {64, 8, 64}}) {
    auto out =
        run(Op::matmul, {make(DType::f32, {B, M, K}, av), make(DType::f32, {K, N}, bv), make(DType::f32, {B, M, N})},
            Attrs{{"tile_m", tm}, {"tile_n", tn}, {"tile_k", tk}});
    expect_close(out, ref, 1e-4);
  }
}

TEST(Kernels, ReductionsSoftmaxArgmax) {
  std::vector<double> x{1, 5, 3, -2, 4, 0};
  auto sum =
      run(Op::sum, {make(DType::f32, {2, 3}, x), make(DType::f32, {2})}, Attrs{{"dims", std::vector<int64_t>{1}}});
  expect_close(sum, {9, 2}, 1e-6);
  auto mean0 =
      run(Op::mean, {make(DType::f32, {2, 3}, x), make(DType::f32, {3})}, Attrs{{"dims", std::vector<int64_t>{0}}});
  expect_close(mean0, {-0.5, 4.5, 1.5}, 1e-6);
  auto mx =
      run(Op::max, {make(DType::f32, {2, 3}, x), make(DType::f32, {})}, Attrs{{"dims", std::vector<int64_t>{0, 1}}});
  expect_close(mx, {5}, 0);
  auto am = run(Op::argmax, {make(DType::f32, {2, 3}, x), make(DType::i64, {2})}, Attrs{{"dim", int64_t{1}}});
  expect_close(am, {1, 1}, 0);
  auto sm = run(Op::softmax, {make(DType::f32, {2, 3}, x), make(DType::f32, {2, 3})}, Attrs{{"dim", int64_t{1}}});
  double z = std::exp(1) + std::exp(5) + std::exp(3);
  expect_close({sm[0], sm[1], sm[2]}, {std::exp(1) / z, std::exp(5) / z, std::exp(3) / z}, 1e-6);
  double z1 = std::exp(-2) + std::exp(4) + 1;
  expect_close({sm[3], sm[5]}, {std::exp(-2) / z1, 1 / z1}, 1e-6);
}

TEST(Kernels, LayoutKernels) {
  std::vector<double> x;
  for (int i = 0; i < 24; ++i) x.push_back(i);
  auto p = run(Op::permute, {make(DType::f32, {2, 3, 4}, x), make(DType::f32, {4, 2, 3})},
               Attrs{{"perm", std::vector<int64_t>{2, 0, 1}}});
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(p[static_cast<std::size_t>((a * 2 + b) * 3 + c)], (b * 3 + c) * 4 + a);
  auto s = run(Op::slice, {make(DType::i64, {2, 3, 4}, x), make(DType::i64, {2, 1, 4})},
               Attrs{{"dim", int64_t{1}}, {"bounds", Shape{2, 3}}});
  expect_close(s, {8, 9, 10, 11, 20, 21, 22, 23}, 0);
  auto c = run(Op::concat,
               {make(DType::f32, {2, 1}, {1, 2}), make(DType::f32, {2, 2}, {3, 4, 5, 6}), make(DType::f32, {2, 3})},
               Attrs{{"dim", int64_t{1}}});
  expect_close(c, {1, 3, 4, 2, 5, 6}, 0);
  auto g = run(
      Op::gather,
      {make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}), make(DType::i64, {2, 2}, {2, 0, 1, 1}), make(DType::f32, {2, 2})},
      Attrs{{"dim", int64_t{1}}});
  expect_close(g, {3, 1, 5, 5}, 0);
  auto e = run(Op::expand, {make(DType::f32, {2, 1}, {7, 8}), make(DType::f32, {2, 2, 3})},
               Attrs{{"shape", Shape{2, 2, 3}}});
  expect_close(e, {7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8}, 0);
  auto cast =
      run(Op::cast, {make(DType::f32, {3}, {1.7, -2.2, 0}), make(DType::i32, {3})}, Attrs{{"dtype", DType::i32}});
  expect_close(cast, {1, -2, 0}, 0);
  auto emb = run(Op::embedding, {make(DType::f32, {3, 2}, {0, 1, 2, 3, 4, 5}), make(DType::i32, {3}, {2, -1, 0}),
                                 make(DType::f32, {3, 2})});
  expect_close(emb, {4, 5, 0, 0, 0, 1}, 0);
}

TEST(Kernels, RopeMatchesReference) {
  const int64_t B = 1, S = 3, H = 2, D = 4;
  auto xv = random_values(B * S * H * D, 3);
  std::vector<double> pos{0, 5, 11};
  auto out =
      run(Op::rope, {make(DType::f32, {B, S, H, D}, xv), make(DType::i64, {B, S}, pos), make(DType::f32, {B, S, H, D})},
          Attrs{{"theta", 10000.0}});
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        double a = pos[static_cast<std::size_t>(s)] * std::pow(10000.0, -2.0 * i / D);
        auto at = [&](int64_t d) { return static_cast<std::size_t>((s * H + h) * D + d); };
        ASSERT_NEAR(out[at(i)], xv[at(i)] * std::cos(a) - xv[at(i + 2)] * std::sin(a), 1e-5);
        ASSERT_NEAR(out[at(i + 2)], xv[at(i + 2)] * std::cos(a) + xv[at(i)] * std::sin(a), 1e-5);
      }
}

TEST(Kernels, ElementwiseFloatAndInteger) {
  auto f = run(Op::div, {make(DType::f32, {3}, {1, 4, 9}), make(DType::f32, {1}, {2}), make(DType::f32, {3})});
  expect_close(f, {0.5, 2, 4.5}, 1e-7);
  auto i =
      run(Op::sub, {make(DType::i64, {2, 1}, {10, 20}), make(DType::i64, {3}, {1, 2, 3}), make(DType::i64, {2, 3})});
  expect_close(i, {9, 8, 7, 19, 18, 17}, 0);
  auto cmp = run(Op::le, {make(DType::i64, {3}, {1, 2, 3}), make(DType::i64, {1}, {2}), make(DType::boolean, {3})});
  expect_close(cmp, {1, 1, 0}, 0);
  for (Op op : {Op::exp, Op::sigmoid, Op::tanh, Op::rsqrt, Op::sin, Op::erf}) {
    std::vector<double> xs{0.25, 1.5};
    auto y = run(op, {make(DType::f32, {2}, xs), make(DType::f32, {2})});
    for (int k = 0; k < 2; ++k) {
      double v = xs[static_cast<std::size_t>(k)];
      double want = op == Op::exp       ? std::exp(v)
                    : op == Op::sigmoid ? 1 / (1 + std::exp(-v))
                    : op == Op::tanh    ? std::tanh(v)
                    : op == Op::rsqrt   ? 1 / std::sqrt(v)
                    : op == Op::erf     ? std::erf(v)
                                        : std::sin(v);
      EXPECT_NEAR(y[static_cast<std::size_t>(k)], want, 1e-6) << op_name(op);
    }
  }
}

// The runtime's one table of unary math covers exactly the elementwise
// unary ops with a kernel, with an integer function exactly for those not
// floating-only; integer operands of a floating-only op are refused.
TEST(Kernels, EveryUnaryOpHasOneScalarFunction) {
  int rows = 0;
  for (uint32_t n = 0; is_op_number(n); ++n) {
    const Op op = static_cast<Op>(n);
    const OpInfo& info = op_info(op);
    const runtime::UnaryMath* m = runtime::unary_math(op);
    const bool kernel_unary = info.cls == OpClass::unary && !info.composite;
    EXPECT_EQ(m != nullptr, kernel_unary) << info.name;
    if (!m) continue;
    ++rows;
    EXPECT_EQ(m->op, op);
    EXPECT_TRUE(m->f32 && m->map) << info.name;
    EXPECT_EQ(m->exact == nullptr, info.floating_only) << info.name;
    // map is f32 applied elementwise.
    const float xs[3] = {-0.75f, 0.5f, 2.0f};
    float ys[3];
    m->map(xs, ys, 3);
    for (int k = 0; k < 3; ++k) {
      const float want = m->f32(xs[k]);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(ys[k])) << info.name;
      else
        EXPECT_EQ(ys[k], want) << info.name;
    }
  }
  EXPECT_GE(rows, 13);
  EXPECT_EQ(runtime::unary_math(Op::add), nullptr);
  EXPECT_EQ(runtime::unary_math(Op::kCount), nullptr);
  auto neg = run(Op::neg, {make(DType::i64, {3}, {-5, 0, 7}), make(DType::i64, {3})});
  expect_close(neg, {5, 0, -7}, 0);
  auto relu = run(Op::relu, {make(DType::i32, {3}, {-5, 0, 7}), make(DType::i32, {3})});
  expect_close(relu, {0, 0, 7}, 0);
  EXPECT_THROW(run(Op::erf, {make(DType::i64, {2}, {1, 2}), make(DType::i64, {2})}), Error);
}

TEST(Kernels, HalfConversionRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f})
    EXPECT_NEAR(runtime::kernels::half_to_float(runtime::kernels::float_to_half(v)), v, std::fabs(v) * 1e-3 + 1e-8)
        << v;
  EXPECT_TRUE(std::isinf(runtime::kernels::half_to_float(runtime::kernels::float_to_half(1e6f))));
  EXPECT_EQ(runtime::kernels::bf16_to_float(runtime::kernels::float_to_bf16(3.0f)), 3.0f);
}

TEST(Kernels, RngIsDeterministicPerSeedAndOffset) {
  runtime::KernelLaunch l;
  l.op = Op::randn;
  l.args = {make(DType::f32, {4096})};
  l.rng_seed = 42;
  runtime::run_kernel(l);
  auto a = read(l.args[0]);
  runtime::run_kernel(l);
  EXPECT_EQ(a, read(l.args[0]));
  double mean = 0, var = 0;
  for (double v : a) mean += v / 4096;
  for (double v : a) var += (v - mean) * (v - mean) / 4096;
  EXPECT_NEAR(mean, 0, 0.1);
  EXPECT_NEAR(var, 1, 0.1);
  l.rng_offset = 4096;
  runtime::run_kernel(l);
  EXPECT_NE(a, read(l.args[0]));
}

TEST(Kernels, CompositeOpHasNoKernel) {
  runtime::KernelLaunch l;
  l.op = Op::linear;
  l.args = {make(DType::f32, {1})};
  EXPECT_THROW(runtime::run_kernel(l), DeviceError);
}
