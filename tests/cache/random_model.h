// Random small models for the differential hunt (random_diff.cpp).
//
// A Program is a list of steps over values of one shape [B, S, D]: values 0
// and 1 are the method's tensors x and y, step j makes value j + 2 from
// earlier values with ops the tracer and compiler support (elementwise,
// activations, linear and matmul, reductions, softmax, norms, attention,
// rope, reshape, permute, transpose, slice, concat, gather, embedding,
// casts, an in-place KV-cache update, constants, the method's plain float
// and integer arguments). Each
// step ends in the shape [B, S, D] again, so any value can feed any later
// step and the result can be fed back as the next call's x.
//
// RandNet runs a Program as a module method. Every RandNet of one width has
// the same parameters (names, shapes), whatever its program reads, so
// random models share `model_info` and method names, and the entries one
// writes are looked up by the next: the hunt's point. Its constructor flag
// `pick_b` chooses which of two layers of the same shape a step reads.
//
// Compile regions (generator 3, add_blocks / add_regions): a program with
// `blocks` registers kBlocks submodules (RandBlock) whatever it reads:
// blocks 0 .. kBlocksA-1 of shape A run the program `body[0]`, the others,
// of shape B (another class, one buffer more), `body[1]`, each block with
// weights of its own. A `region` step calls block i through
// nn::compile_region with two values of the program, the method's other
// tensors (the KV cache a body may update in place) and its float and
// integer arguments as plain values.
//
// Everything is deterministic from the Rng's seed; describe() prints a
// program so a failure can be read and replayed.
#pragma once

#include <npucache/npucache.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace npucache::randtest {

// splitmix64: the same numbers on every platform and build.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t s_;
};

std::uint64_t mix(std::uint64_t a, std::uint64_t b);

enum class Kind : int {
  unary,            // op(a)
  binary,           // op(a, b)
  scalar_const,     // a op constant
  scalar_arg,       // a op s (the method's float argument: a guard)
  full_const,       // a + full(shape, constant)
  select_linear,    // the layer pick_b chooses (sel_a or sel_b: same shapes)
  up_down,          // down(act(up(a)))
  matmul_param,     // a @ mat
  flatten_linear,   // reshape to [-1, D], sel_a, reshape back
  attention_mm,     // softmax(a @ b^T / sqrt(D)) @ c
  sdpa,             // attention over heads (reshape, permute, attention)
  rope,             // rope over heads with positions from arange/expand
  reduce,           // a - op(a, dim, keepdim)
  argmax,           // a + argmax(x, -1) cast to f32
  softmax,          // softmax(a, dim)
  rmsnorm,          //
  layernorm,        //
  shuffle,          // reshape [B, S, D/2, 2], permute, reshape back
  transpose_sm,     // softmax over the sequence through transposes
  permute_rt,       // act(a permuted) permuted back
  slice_rotate,     // concat(a[..., i:], a[..., :i])
  slice_seq_const,  // a + sum(a[:, :i]) (a guard i <= S)
  slice_seq_arg,    // a - mean(a[:, :k]) (k: the method's integer argument)
  seq_rotate,       // concat(a[:, 1:S], a[:, :1]) (a symbolic end)
  concat_linear,    // down(concat(a, b))
  gather,           // gather(a, idx, -1)
  embedding,        // a + embedding(emb, ids)
  where,            // where(x > c, a, a * 0.5)
  cast_rt,          // x to f16 or bf16 and back
  expand_reduce,    // a + expand(mean(a, 1))
  kv_write,         // writes a into the KV cache at positions 0..S-1 in place; a + mean of the cache
  // Graph breaks (generator 2, add_breaks; never drawn by random_program
  // or mutate, so the seeds of generator 1 draw what they drew):
  layer_reads,   // tanh(sel_a(a)), a host read, tanh(sel_b(.)), a host read:
                 // pieces of one structure reading other layers
  truth_branch,  // a tensor's truth value (sum(a) > f + Program::branch_offset) picks a * 2 - 1 or tanh(a)
  // Compile regions (generator 3, add_regions; never drawn by
  // random_program or mutate):
  region,  // compile_region(block i, a, b, ...): its shape's body over (a, b);
           // op 1: over rows 1 .. S-1 of a, b, ids and idx, row 0 of a put back
  kCount
};
// The kinds random_program and mutate draw from.
constexpr int kDrawnKinds = static_cast<int>(Kind::layer_reads);

struct Step {
  Kind kind = Kind::unary;
  int a = 0, b = 0, c = 0;  // operand values
  int op = 0;               // which unary, binary, reduction, dtype, ...
  int i = 0;                // an integer attribute (dim, bound, heads)
  double f = 0;             // a float constant, eps or theta
};

constexpr int kBlocksA = 3;  // blocks of shape A (the rest are of shape B)
constexpr int kBlocks = 5;

struct Program {
  int width = 8;  // D
  std::vector<Step> steps;
  int aux = 0;          // the second result of forward_pair
  bool pick_b = false;  // which layer select_linear reads
  int class_name = 0;   // 0 or 1: RandNet's type_name
  // Compile regions: whether RandNet registers its blocks, and the bodies
  // of shapes A and B (values 0 and 1 are the region's two tensors; the
  // body's result is its last value).
  bool blocks = false;
  std::array<std::vector<Step>, 2> body;
  std::array<bool, 2> body_pick_b{false, false};
  // Added to truth_branch's threshold (add_blocks: 1/64). A sum that is 0
  // whatever the values (a - mean(a[:, :k]) with k = S) sits on threshold
  // 0, where rounding picks the branch: eager and compiled code may differ
  // there without a defect.
  double branch_offset = 0;
};

Program random_program(Rng& rng, int width);
// A small change: a constant to another, an op to another, operands, the
// layer flag, a bound.
void mutate(Program& p, Rng& rng);
// Appends one or two steps that break the graph (a host read between
// same-shaped layers, a branch on a tensor's truth value) reading earlier
// values; the method then runs as pieces (fullgraph=false).
void add_breaks(Program& p, Rng& rng);
// Graph breaks in the method's steps or in a region's body.
bool has_breaks(const Program& p);
// Registers blocks and draws both bodies (0 to 3 steps each).
void add_blocks(Program& p, Rng& rng);
// Appends one to three region steps (sometimes the same block twice).
void add_regions(Program& p, Rng& rng);
// A small change of the regions: a body's step, op or layer flag, a step
// more or less in a body, another block for a call.
void mutate_regions(Program& p, Rng& rng);
// Appends a graph break to a body (a region then cannot be one graph).
void add_body_break(Program& p, Rng& rng);
bool has_regions(const Program& p);
std::string describe(const Program& p);

// The method's arguments: x, y [B, S, D] f32; ids [B, S] i64 (some out of
// the embedding's range); idx [B, S, D] i64 in [0, D); kv [B, kMaxSeq, D]
// f32, a cache the program may update in place; s; k.
struct Args {
  Tensor x, y, ids, idx, kv;
  double s = 1;
  std::int64_t k = 1;
};

constexpr int kMaxSeq = 6;  // the KV cache's length: calls have S <= kMaxSeq

// The parameters every step may read, and the steps themselves (RandNet
// and RandBlock). The parameters are registered in one order, whatever a
// program reads.
class Layers : public nn::Module {
 public:
  Layers(int width, double branch_offset);

 protected:
  // Random values for every parameter registered so far.
  void init(std::uint64_t seed);
  Tensor step(const Step& st, bool pick_b, const std::vector<Tensor>& v, const Tensor& ids, const Tensor& idx,
              const Tensor& kv, double s, std::int64_t k) const;
  std::int64_t width_;
  double branch_offset_;
  std::shared_ptr<nn::Linear> sel_a_, sel_b_, up_, down_;
  Tensor mat_, norm_w_, norm_b_, emb_;
};

// A repeated block: its shape's body over (a, b); shape B adds a buffer
// `scale` to its result. `forward` is virtual: block kAltBlock is a
// RandBlockAlt, another class of the same type_name() and parameters whose
// forward ends in tanh (a pointer to a virtual method names its slot, the
// same for both classes: their regions must not share a body).
class RandBlock : public Layers {
 public:
  RandBlock(const Program& p, int shape, std::uint64_t weight_seed);
  std::string type_name() const override;
  virtual Tensor forward(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& idx, const Tensor& kv,
                         double s, std::int64_t k) const;

 private:
  int shape_;
  std::vector<Step> steps_;
  bool pick_b_;
  Tensor scale_;
};

constexpr int kAltBlock = 1;  // of shape A

class RandBlockAlt : public RandBlock {
 public:
  using RandBlock::RandBlock;
  Tensor forward(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& idx, const Tensor& kv, double s,
                 std::int64_t k) const override;
};

class RandNet : public Layers {
 public:
  RandNet(Program p, std::uint64_t weight_seed);
  std::string type_name() const override;
  Tensor forward(const Tensor& x, const Tensor& y, const Tensor& ids, const Tensor& idx, const Tensor& kv, double s,
                 std::int64_t k);
  std::vector<Tensor> forward_pair(const Tensor& x, const Tensor& y, const Tensor& ids, const Tensor& idx,
                                   const Tensor& kv, double s, std::int64_t k);
  const Program& program() const { return p_; }

 private:
  std::vector<Tensor> run(const Tensor& x, const Tensor& y, const Tensor& ids, const Tensor& idx, const Tensor& kv,
                          double s, std::int64_t k) const;
  Program p_;
  std::vector<std::shared_ptr<RandBlock>> blocks_;
};

constexpr int kVocab = 11;  // rows of the embedding; ids reach -1 and kVocab

}  // namespace npucache::randtest
