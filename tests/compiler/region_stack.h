// Models for the compile-region tests: a Block (a matmul with its own
// weight and buffer, an in-place write into a cache it is given, a
// residual) and a Stack of blocks of one or two widths, each called
// through nn::compile_region, with their inputs, and the check that a
// compiled one runs as eager.
#pragma once

#include <npucache/ir/graph.h>
#include <npucache/module.h>
#include <npucache/ops.h>
#include <npucache/region.h>

#include <memory>
#include <string>
#include <vector>

#include "support/expect_close.h"
#include "support/small_models.h"

namespace npucache::region_stack {

using testing_support::ramp;

// A block: a matmul with its own weight, a write of its result's first
// rows into a cache it is given, and a residual.
struct Block : nn::Module {
  Tensor w, b;
  int* runs;
  Block(int64_t width, float seed, int* counter) : runs(counter) {
    w = register_parameter("w", Tensor::from_vector(ramp(width * width, 0.01f * seed, -0.05f), {width, width}));
    b = register_buffer("b", Tensor::from_vector(ramp(width, 0.02f, seed * 0.01f), {width}));
  }
  std::string type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x, const Tensor& positions, const Tensor& cache) const {
    ++*runs;
    Tensor h = ops::tanh(ops::matmul(x, w) + b);
    ops::buffer_update(cache, positions, h);
    return x + h * 0.5f;
  }
};

// `depth` blocks of `width`, then `wide` blocks of twice the width (the
// input is widened by concatenation between them).
struct Stack : nn::Module {
  std::vector<std::shared_ptr<Block>> blocks, wide_blocks;
  int runs = 0;
  Stack(int depth, int wide, int64_t width) {
    for (int i = 0; i < depth; ++i)
      blocks.push_back(std::make_shared<Block>(width, 1.0f + static_cast<float>(i), &runs));
    for (int i = 0; i < wide; ++i)
      wide_blocks.push_back(std::make_shared<Block>(2 * width, 3.0f - static_cast<float>(i), &runs));
    struct Named : nn::Module {
      Named(const std::vector<std::shared_ptr<Block>>& a, const std::vector<std::shared_ptr<Block>>& b) {
        for (std::size_t i = 0; i < a.size(); ++i) register_module(std::to_string(i), a[i]);
        for (std::size_t i = 0; i < b.size(); ++i) register_module(std::to_string(a.size() + i), b[i]);
      }
    };
    register_module("blocks", std::make_shared<Named>(blocks, wide_blocks));
  }
  std::string type_name() const override { return "Stack"; }
  // caches: one [B, S, width] per narrow block, [B, S, 2 width] per wide one.
  Tensor forward(const Tensor& x, const Tensor& positions, const std::vector<Tensor>& caches) {
    Tensor h = x;
    std::size_t c = 0;
    for (const auto& blk : blocks) h = nn::compile_region(*blk, &Block::forward, h, positions, caches[c++]);
    if (!wide_blocks.empty()) h = ops::concat({h, h}, -1);
    for (const auto& blk : wide_blocks) h = nn::compile_region(*blk, &Block::forward, h, positions, caches[c++]);
    return h;
  }
};

struct Inputs {
  Tensor x, positions;
  std::vector<Tensor> caches;
};

inline Inputs inputs(const Stack& m, int64_t batch, int64_t seq, int64_t width) {
  Inputs in;
  in.x = Tensor::from_vector(ramp(batch * seq * width, 0.03f, -0.2f), {batch, seq, width});
  std::vector<int64_t> pos;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) pos.push_back(s);
  in.positions = Tensor::from_vector_i64(pos, {batch, seq});
  for (std::size_t i = 0; i < m.blocks.size(); ++i)
    in.caches.push_back(
        Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(batch * 8 * width), 0.0f), {batch, 8, width}));
  for (std::size_t i = 0; i < m.wide_blocks.size(); ++i)
    in.caches.push_back(Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(batch * 8 * 2 * width), 0.0f),
                                            {batch, 8, 2 * width}));
  return in;
}

inline std::size_t flat_inputs(const Inputs& in) { return 2 + in.caches.size(); }

// Runs `f` (Stack::forward compiled or cached) and `m` eagerly, each on
// inputs of its own, `steps` times: results and caches equal.
template <class F>
void expect_as_eager(F& f, Stack& m, int steps = 2) {
  Inputs eager_in = inputs(m, 2, 3, 8), compiled_in = inputs(m, 2, 3, 8);
  for (int step = 0; step < steps; ++step) {
    Tensor want = m.forward(eager_in.x, eager_in.positions, eager_in.caches);
    Tensor got = f(compiled_in.x, compiled_in.positions, compiled_in.caches);
    testing_support::expect_close(got.to_vector(), want.to_vector(), "result", 1e-5f);
    for (std::size_t i = 0; i < eager_in.caches.size(); ++i)
      testing_support::expect_close(compiled_in.caches[i].to_vector(), eager_in.caches[i].to_vector(), "cache", 1e-5f);
  }
}

inline std::vector<const Node*> calls(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes())
    if (n.op == Op::region_call) out.push_back(&n);
  return out;
}

}  // namespace npucache::region_stack
