// Compiling without weights: a Llama-3-70B-shaped stage (one layer at
// tp = 1 with the embedding and the LM head, the largest matrices of the
// model, 4 GiB each in f32) traces and compiles with meta weights, and the
// process's peak resident memory grows by less than kBound.
//
// Why kBound = 256 MiB: autotuning times one kernel at a time on at most
// 64 MiB of scratch (compiler/autotune_scratch.h) and returns it before the
// next; the graphs, programs and their serialized forms of a one-layer
// stage take a few MiB; the allocator and the C++ runtime add page-rounding
// slack. Without the bound the LM head's weight alone is 3.9 GiB of scratch
// and the gate/up weights 0.9 GiB each, so the bound tells the two apart by
// more than an order of magnitude.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/models/models.h>

#include "compiler/autotune_scratch.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

using namespace npucache;

namespace {

constexpr std::size_t kBound = std::size_t{256} << 20;

// A field of /proc/self/status in bytes (VmRSS, VmHWM).
std::size_t status_bytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  return 0;
}

// Resets the peak (VmHWM) to the current resident size; false when the
// kernel does not allow it (Linux >= 4.0 does).
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

}  // namespace

TEST(ModelMemory, A70BStageCompilesWithMetaWeightsWithinTheScratchBound) {
  models::DecoderConfig c = models::load_hf_config(models::find_shipped_config("llama-3-70b"));
  c.layers = 1;
  const auto need = models::stage_memory(c, {});
  EXPECT_GT(need.weights, std::size_t{9} << 30);  // what real weights would take

  ASSERT_TRUE(reset_peak_rss()) << "cannot reset VmHWM through /proc/self/clear_refs";
  const std::size_t start = status_bytes("VmRSS");
  ASSERT_GT(start, 0u);
  Device& dev = Platform::get().device(current_device());
  dev.empty_cache();
  const std::size_t device_start = dev.memory_stats().allocated;
  {
    models::Decoder model(c, {}, models::Weights::meta);
    CompileOptions o;
    CompilerConfig cc;
    cc.autotune_candidates = 2;
    cc.autotune_repetitions = 1;
    cc.autotune_min_time_us = 0;
    o.config = cc;
    auto prompt = compile(model, &models::Decoder::prompt, o);
    auto decode = compile(model, &models::Decoder::decode, o);
    auto kv = model.make_kv_cache(1);
    prompt.prepare(Tensor::from_vector_i64({1, 17, 42, 99, 7, 3, 250, 12}, {1, 8}),
                   Tensor::from_vector_i64({0, 1, 2, 3, 4, 5, 6, 7}, {1, 8}), kv);
    decode.prepare(Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({8}, {1, 1}), kv);
    EXPECT_EQ(prompt.compiles() + decode.compiles(), 2u);
  }
  const std::size_t peak = status_bytes("VmHWM");
  const std::size_t growth = peak > start ? peak - start : 0;
  std::printf("  VmRSS at start %.1f MiB, VmHWM after compiling %.1f MiB: grew %.1f MiB (bound %zu MiB)\n",
              static_cast<double>(start) / (1 << 20), static_cast<double>(peak) / (1 << 20),
              static_cast<double>(growth) / (1 << 20), kBound >> 20);
  EXPECT_LT(growth, kBound);
  EXPECT_GT(growth, compiler::kAutotuneScratchBytes / 2);  // the scratch was used, up to its bound
  EXPECT_EQ(dev.memory_stats().allocated, device_start);   // scratch returned
}
