// The autotune scratch bound: which slice of a large kernel is timed.
#include "compiler/autotune_scratch.h"

#include <gtest/gtest.h>

using namespace npucache;
using compiler::bound_matmul;
using compiler::scratch_bytes;

namespace {

std::vector<runtime::TensorArg> matmul(std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t> c) {
  return {{nullptr, 0, DType::f32, std::move(a)},
          {nullptr, 0, DType::f32, std::move(b)},
          {nullptr, 0, DType::f32, std::move(c)}};
}

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

TEST(AutotuneScratch, SmallKernelsAreTimedAtFullSize) {
  auto args = matmul({8, 4096}, {2048, 4096}, {8, 2048});  // 32 MiB of weight
  const auto b = bound_matmul(args, true, 64 * kMiB);
  EXPECT_TRUE(b.timed);
  EXPECT_EQ(b.note, "");
  EXPECT_EQ(args[1].dims, (std::vector<int64_t>{2048, 4096}));
}

TEST(AutotuneScratch, ALargeWeightIsTimedOnASliceOfItsRows) {
  // A Llama-3-70B LM head at tp = 1: [8, 8192] x [128256, 8192]^T, 3.9 GiB.
  auto args = matmul({1, 8, 8192}, {128256, 8192}, {1, 8, 128256});
  ASSERT_GT(scratch_bytes(args), 3000 * kMiB);
  const auto b = bound_matmul(args, true, 64 * kMiB);
  EXPECT_TRUE(b.timed);
  EXPECT_LE(scratch_bytes(args), 64 * kMiB);
  EXPECT_GT(scratch_bytes(args), 60 * kMiB);  // as large as the bound allows
  EXPECT_EQ(args[1].dims[0] % 64, 0);
  EXPECT_EQ(args[1].dims[1], 8192);  // K is kept
  EXPECT_EQ(args[2].dims.back(), args[1].dims[0]);
  EXPECT_EQ(b.note, "timed on N " + std::to_string(args[1].dims[0]) + " of 128256 (64 MiB autotune scratch bound)");
  // Untransposed b [K, N] slices its columns.
  auto plain = matmul({8, 8192}, {8192, 128256}, {8, 128256});
  EXPECT_TRUE(bound_matmul(plain, false, 64 * kMiB).timed);
  EXPECT_EQ(plain[1].dims[1], plain[2].dims[1]);
  EXPECT_LE(scratch_bytes(plain), 64 * kMiB);
}

TEST(AutotuneScratch, RowsAndBatchesShrinkWhenColumnsAreNotEnough) {
  // A long prompt: a is [32, 65536, 8192] (64 GiB).
  auto args = matmul({32, 65536, 8192}, {1024, 8192}, {32, 65536, 1024});
  const auto b = bound_matmul(args, true, 64 * kMiB);
  EXPECT_TRUE(b.timed) << b.note;
  EXPECT_LE(scratch_bytes(args), 64 * kMiB);
  EXPECT_EQ(b.note, "timed on batch 1 of 32, M 896 of 65536 (64 MiB autotune scratch bound)");
  EXPECT_EQ(args[1].dims, (std::vector<int64_t>{1024, 8192}));  // the weight is whole
  // One row and column of K = 2^24 already exceed 64 MiB: not timed.
  auto huge = matmul({1, 1 << 24}, {1 << 24, 2}, {1, 2});
  const auto h = bound_matmul(huge, false, 64 * kMiB);
  EXPECT_FALSE(h.timed);
  EXPECT_EQ(huge[0].dims, (std::vector<int64_t>{1, 1 << 24}));  // left as it was
  EXPECT_NE(h.note.find("not timed"), std::string::npos);
}
