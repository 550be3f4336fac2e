// Batched matmul: a [..., M, K] x b [..., K, N] -> [..., M, N], batch dims
// broadcast; with trans_b, b is [..., N, K]. Attributes tile_m/tile_n/tile_k choose a blocked i-k-j loop
// (the autotuner's search space); tile_m == 0 selects the naive dot-product
// loop, kept as the baseline the tiled kernels are measured against.
#include "runtime/kernels/kernel_util.h"

#include <algorithm>

namespace npucache::runtime::kernels {
namespace {

constexpr int64_t kDefaultTileM = 32;   // rows of A kept hot per block
constexpr int64_t kDefaultTileN = 256;  // a row segment of B/C that fits L1 with A's tile
constexpr int64_t kDefaultTileK = 128;

void naive(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
      C[i * N + j] = s;
    }
}

// The tiled kernels are built for AVX2+FMA as well as the baseline, the
// best chosen at load time (GCC function multi-versioning). Not under
// TSan: the clones' resolver runs while the dynamic loader relocates the
// library, before the TSan runtime is initialised, and GCC instruments it
// (the process dies in the loader).
#if defined(__SANITIZE_THREAD__)
#define NPUCACHE_VECTOR_CLONES
#else
#define NPUCACHE_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif

NPUCACHE_VECTOR_CLONES
void tiled(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, int64_t tm, int64_t tn,
           int64_t tk) {
  std::fill(C, C + M * N, 0.0f);
  for (int64_t i0 = 0; i0 < M; i0 += tm) {
    const int64_t i1 = std::min(M, i0 + tm);
    for (int64_t k0 = 0; k0 < K; k0 += tk) {
      const int64_t k1 = std::min(K, k0 + tk);
      for (int64_t j0 = 0; j0 < N; j0 += tn) {
        const int64_t j1 = std::min(N, j0 + tn);
        for (int64_t i = i0; i < i1; ++i) {
          float* __restrict c = C + i * N;
          for (int64_t k = k0; k < k1; ++k) {
            const float aik = A[i * K + k];
            const float* __restrict b = B + k * N;
            for (int64_t j = j0; j < j1; ++j) c[j] += aik * b[j];
          }
        }
      }
    }
  }
}

// a[0..n) . b[0..n) with eight independent partial sums, so the compiler
// vectorises it without reassociating one serial sum (which it may not do
// under strict floating point): the dot products of a transposed-B matmul
// run at vector speed instead of one multiply-add per cycle.
[[gnu::always_inline]] inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  constexpr int kLanes = 8;
  float acc[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int u = 0; u < kLanes; ++u) acc[u] += a[k + u] * b[k + u];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; k < n; ++k) s += a[k] * b[k];
  return s;
}

// C = A * B^T with B stored [N, K]: blocked dot products over contiguous
// rows of A and B.
NPUCACHE_VECTOR_CLONES
void tiled_tb(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, int64_t tm, int64_t tn,
              int64_t tk) {
  std::fill(C, C + M * N, 0.0f);
  for (int64_t i0 = 0; i0 < M; i0 += tm) {
    const int64_t i1 = std::min(M, i0 + tm);
    for (int64_t j0 = 0; j0 < N; j0 += tn) {
      const int64_t j1 = std::min(N, j0 + tn);
      for (int64_t k0 = 0; k0 < K; k0 += tk) {
        const int64_t k1 = std::min(K, k0 + tk);
        for (int64_t i = i0; i < i1; ++i) {
          const float* __restrict a = A + i * K;
          for (int64_t j = j0; j < j1; ++j) C[i * N + j] += dot(a + k0, B + j * K + k0, k1 - k0);
        }
      }
    }
  }
}

void naive_tb(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[j * K + k];
      C[i * N + j] = s;
    }
}

}  // namespace

void matmul_kernel(const KernelLaunch& l) {
  if (l.args.size() != 3) kernel_fail(l, "expects 2 inputs and an output");
  const auto& ad = l.args[0].dims;
  const auto& bd = l.args[1].dims;
  const auto& od = l.args[2].dims;
  if (ad.size() < 2 || bd.size() < 2 || od.size() < 2) kernel_fail(l, "operands need rank >= 2");
  const bool tb = l.attrs && l.attrs->get_bool_or("trans_b", false);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = tb ? bd[bd.size() - 2] : bd.back();
  if (bd[bd.size() - (tb ? 1 : 2)] != K || od[od.size() - 2] != M || od.back() != N)
    kernel_fail(l, "inconsistent matmul dims");
  int64_t tm = kDefaultTileM, tn = kDefaultTileN, tk = kDefaultTileK;
  if (l.attrs) {
    tm = l.attrs->get_int_or("tile_m", tm);
    tn = l.attrs->get_int_or("tile_n", tn);
    tk = l.attrs->get_int_or("tile_k", tk);
  }
  if (tm < 0 || tn < 0 || tk < 0 || (tm > 0 && (tn == 0 || tk == 0))) kernel_fail(l, "invalid tile sizes");
  FloatIn a(l.args[0]), b(l.args[1]);
  FloatOut o(l.args[2]);
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2),
      obatch(od.begin(), od.end() - 2);
  for_each_broadcast<2>(obatch, {&abatch, &bbatch}, [&](int64_t ob, const std::array<int64_t, 2>& j) {
    const float* A = a.data() + j[0] * M * K;
    const float* B = b.data() + j[1] * K * N;
    float* C = o.data() + ob * M * N;
    if (tb)
      tm == 0 ? naive_tb(A, B, C, M, N, K) : tiled_tb(A, B, C, M, N, K, tm, tn, tk);
    else
      tm == 0 ? naive(A, B, C, M, N, K) : tiled(A, B, C, M, N, K, tm, tn, tk);
  });
  o.commit();
}

}  // namespace npucache::runtime::kernels
