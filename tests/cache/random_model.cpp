// Random small models for the differential hunt (random_model.h).
#include "random_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace npucache::randtest {
namespace {

// Constants a step multiplies by or fills with. The two tiny ones differ
// by a factor of 100 and are scaled back up by the step (x 1e8), so a
// program served for the other one gives results 100 times off.
constexpr double kMulConsts[] = {0.5, 2.0, -1.25, 0.1, 3.0, 1e-7, 1e-9};
constexpr double kAddConsts[] = {0.5, 2.0, -1.25, 0.1, 3.0};
constexpr double kDivConsts[] = {0.5, 2.0, -1.25, 3.0};
constexpr double kEps[] = {1e-5, 1e-6, 1e-3};
constexpr double kTheta[] = {10000.0, 500000.0, 100.0};
constexpr double kThresholds[] = {0.0, 0.25, -0.25};
constexpr double kTiny = 1e-6;
constexpr double kTinyScale = 1e8;

const char* const kUnary[] = {
    "relu", "gelu", "silu",      "sigmoid",     "tanh",       "neg",          "abs",
    "sin",  "cos",  "exp(tanh)", "sqrt(abs+1)", "log(abs+1)", "rsqrt(abs+1)", "reciprocal(abs+1)"};
const char* const kBinary[] = {
    "add", "sub", "mul", "div(a,|b|+1)", "maximum", "minimum", "pow(sig(a)+.5,tanh b)", "where(a>=b,a,b)"};
const char* const kReduce[] = {"sum", "mean", "max"};
const char* const kActs[] = {"gelu", "silu", "relu"};
const char* const kKinds[] = {
    "unary",         "binary",       "scalar_const",   "scalar_arg",      "full_const",    "select_linear",
    "up_down",       "matmul_param", "flatten_linear", "attention_mm",    "sdpa",          "rope",
    "reduce",        "argmax",       "softmax",        "rmsnorm",         "layernorm",     "shuffle",
    "transpose_sm",  "permute_rt",   "slice_rotate",   "slice_seq_const", "slice_seq_arg", "seq_rotate",
    "concat_linear", "gather",       "embedding",      "where",           "cast_rt",       "expand_reduce",
    "kv_write",      "layer_reads",  "truth_branch",   "region"};
static_assert(std::size(kKinds) == static_cast<std::size_t>(Kind::kCount));

template <class T, std::size_t N>
T pick(Rng& r, const T (&menu)[N]) {
  return menu[r.below(static_cast<int>(N))];
}

// An operand among values [0, n): mostly one of the last three.
int operand(Rng& r, int n) { return r.chance(0.6) ? n - 1 - r.below(std::min(n, 3)) : r.below(n); }

void fill_step(Step& s, Rng& r, int n, int width) {
  s.a = operand(r, n);
  s.b = operand(r, n);
  s.c = operand(r, n);
  s.op = 0;
  s.i = 0;
  s.f = 0;
  switch (s.kind) {
    case Kind::unary: s.op = r.below(static_cast<int>(std::size(kUnary))); break;
    case Kind::binary: s.op = r.below(static_cast<int>(std::size(kBinary))); break;
    case Kind::scalar_const:
      s.op = r.below(4);  // mul, add, sub, div
      s.f = s.op == 0 ? pick(r, kMulConsts) : s.op == 3 ? pick(r, kDivConsts) : pick(r, kAddConsts);
      break;
    case Kind::scalar_arg: s.op = r.below(2); break;
    case Kind::full_const: s.f = pick(r, kMulConsts); break;
    case Kind::up_down:
    case Kind::permute_rt: s.op = r.below(3); break;
    case Kind::sdpa:
      s.i = 1 + r.below(2);  // heads
      s.op = r.below(2);     // causal
      break;
    case Kind::rope:
      s.i = 1 + r.below(2);
      s.f = pick(r, kTheta);
      break;
    case Kind::reduce:
      s.op = r.below(3);
      s.i = 1 + r.below(2);
      break;
    case Kind::softmax: s.i = 1 + r.below(2); break;
    case Kind::rmsnorm:
    case Kind::layernorm: s.f = pick(r, kEps); break;
    case Kind::slice_rotate: s.i = 1 + r.below(width - 1); break;
    case Kind::slice_seq_const: s.i = 1 + r.below(3); break;
    // Ops with a jump (argmax, where, a cast's rounding) read an input only:
    // a value computed by other kernels in another order may sit on the
    // other side of the jump.
    case Kind::argmax: s.b = r.below(2); break;
    case Kind::where:
      s.b = r.below(2);
      s.f = pick(r, kThresholds);
      break;
    case Kind::cast_rt:
      s.b = r.below(2);
      s.op = r.below(2);
      break;
    case Kind::truth_branch: s.f = pick(r, kThresholds); break;
    default: break;
  }
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  Rng r(a ^ (b * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
  r.next();
  return r.next();
}

Program random_program(Rng& r, int width) {
  Program p;
  p.width = width;
  const int n = 1 + r.below(7);
  for (int j = 0; j < n; ++j) {
    Step s;
    s.kind = static_cast<Kind>(r.below(kDrawnKinds));
    fill_step(s, r, 2 + j, width);
    p.steps.push_back(s);
  }
  p.aux = r.below(2 + n);
  p.pick_b = r.chance(0.5);
  p.class_name = r.chance(0.8) ? 0 : 1;
  return p;
}

void add_breaks(Program& p, Rng& r) {
  const int k = 1 + r.below(2);
  for (int j = 0; j < k; ++j) {
    Step s;
    s.kind = r.chance(0.5) ? Kind::layer_reads : Kind::truth_branch;
    fill_step(s, r, 2 + static_cast<int>(p.steps.size()), p.width);
    p.steps.push_back(s);
  }
}

bool has_breaks(const Program& p) {
  auto breaks = [](const std::vector<Step>& steps) {
    return std::any_of(steps.begin(), steps.end(),
                       [](const Step& s) { return s.kind == Kind::layer_reads || s.kind == Kind::truth_branch; });
  };
  return breaks(p.steps) || (has_regions(p) && (breaks(p.body[0]) || breaks(p.body[1])));
}

bool has_regions(const Program& p) {
  return std::any_of(p.steps.begin(), p.steps.end(), [](const Step& s) { return s.kind == Kind::region; });
}

namespace {

void add_body_step(Program& p, int shape, Rng& r) {
  std::vector<Step>& body = p.body[static_cast<std::size_t>(shape)];
  Step s;
  s.kind = static_cast<Kind>(r.below(kDrawnKinds));
  fill_step(s, r, 2 + static_cast<int>(body.size()), p.width);
  body.push_back(s);
}

// A block of `shape`, or of either.
int block(Rng& r, int shape) {
  if (shape < 0) shape = r.chance(0.6) ? 0 : 1;
  return shape == 0 ? r.below(kBlocksA) : kBlocksA + r.below(kBlocks - kBlocksA);
}

}  // namespace

void add_blocks(Program& p, Rng& r) {
  p.blocks = true;
  p.branch_offset = 1.0 / 64;
  for (int shape = 0; shape < 2; ++shape) {
    p.body[static_cast<std::size_t>(shape)].clear();
    // Sometimes no step: the region returns its argument.
    const int n = r.chance(0.1) ? 0 : 1 + r.below(3);
    for (int j = 0; j < n; ++j) add_body_step(p, shape, r);
    p.body_pick_b[static_cast<std::size_t>(shape)] = r.chance(0.5);
  }
}

void add_regions(Program& p, Rng& r) {
  const int k = 1 + r.below(3);
  // Mostly one shape (its blocks with their own weights), sometimes both.
  const int shape = r.chance(0.7) ? r.below(2) : -1;
  int last = -1;
  for (int j = 0; j < k; ++j) {
    Step s;
    s.kind = Kind::region;
    fill_step(s, r, 2 + static_cast<int>(p.steps.size()), p.width);
    s.i = last >= 0 && r.chance(0.25) ? last : block(r, shape);  // the same module twice
    s.op = r.chance(0.25) ? 1 : 0;                               // over rows 1 .. S-1
    last = s.i;
    p.steps.push_back(s);
  }
}

void mutate_regions(Program& p, Rng& r) {
  const int shape = r.below(2);
  std::vector<Step>& body = p.body[static_cast<std::size_t>(shape)];
  switch (r.below(5)) {
    case 0: p.body_pick_b[static_cast<std::size_t>(shape)] = !p.body_pick_b[static_cast<std::size_t>(shape)]; break;
    case 1:
      if (!body.empty()) {  // another op, constant or attribute
        Step& s = body[static_cast<std::size_t>(r.below(static_cast<int>(body.size())))];
        const Step old = s;
        fill_step(s, r, 2 + static_cast<int>(&s - body.data()), p.width);
        s.a = old.a;
        s.c = old.c;
        if (s.kind != Kind::argmax && s.kind != Kind::where && s.kind != Kind::cast_rt) s.b = old.b;
        break;
      }
      [[fallthrough]];
    case 2: add_body_step(p, shape, r); break;
    case 3:
      if (!body.empty()) body.pop_back();
      break;
    default:
      for (Step& s : p.steps)
        if (s.kind == Kind::region && r.chance(0.5)) s.i = block(r, -1);
      break;
  }
}

void add_body_break(Program& p, Rng& r) {
  std::vector<Step>& body = p.body[static_cast<std::size_t>(r.below(2))];
  Step s;
  s.kind = r.chance(0.5) ? Kind::layer_reads : Kind::truth_branch;
  fill_step(s, r, 2 + static_cast<int>(body.size()), p.width);
  body.push_back(s);
}

void mutate(Program& p, Rng& r) {
  const int n = static_cast<int>(p.steps.size());
  switch (r.below(6)) {
    case 0: p.pick_b = !p.pick_b; break;
    case 1: p.aux = r.below(2 + n); break;
    case 2: {  // another constant, op or attribute, same kind and operands
      Step& s = p.steps[static_cast<std::size_t>(r.below(n))];
      const Step old = s;
      fill_step(s, r, 2 + static_cast<int>(&s - p.steps.data()), p.width);
      s.a = old.a;
      s.b = (s.kind == Kind::argmax || s.kind == Kind::where || s.kind == Kind::cast_rt) ? s.b : old.b;
      s.c = old.c;
      break;
    }
    case 3: {  // other operands
      Step& s = p.steps[static_cast<std::size_t>(r.below(n))];
      const int at = 2 + static_cast<int>(&s - p.steps.data());
      std::swap(s.a, s.b);
      if (r.chance(0.5)) s.a = operand(r, at);
      if (s.kind == Kind::argmax || s.kind == Kind::where || s.kind == Kind::cast_rt) s.b = r.below(2);
      break;
    }
    case 4: {  // one step more
      Step s;
      s.kind = static_cast<Kind>(r.below(kDrawnKinds));
      fill_step(s, r, 2 + n, p.width);
      p.steps.push_back(s);
      break;
    }
    default:
      if (n > 1) {
        p.steps.pop_back();
        p.aux = std::min(p.aux, n);  // values 0 .. n now
      } else {
        p.class_name ^= 1;
      }
      break;
  }
}

namespace {

void describe_steps(std::ostringstream& o, const std::vector<Step>& steps) {
  for (std::size_t j = 0; j < steps.size(); ++j) {
    const Step& s = steps[j];
    o << " v" << j + 2 << "=" << kKinds[static_cast<int>(s.kind)];
    switch (s.kind) {
      case Kind::unary: o << "[" << kUnary[s.op] << "]"; break;
      case Kind::binary: o << "[" << kBinary[s.op] << "]"; break;
      case Kind::scalar_const:
        o << "["
          << "*+-/"[s.op] << num(s.f) << "]";
        break;
      case Kind::scalar_arg:
        o << "["
          << "*+"[s.op] << "s]";
        break;
      case Kind::up_down:
      case Kind::permute_rt: o << "[" << kActs[s.op] << "]"; break;
      case Kind::reduce: o << "[" << kReduce[s.op] << " dim " << s.i << "]"; break;
      case Kind::cast_rt: o << "[" << (s.op ? "bf16" : "f16") << "]"; break;
      case Kind::sdpa: o << "[heads " << s.i << (s.op ? " causal" : "") << "]"; break;
      case Kind::rope: o << "[heads " << s.i << " theta " << num(s.f) << "]"; break;
      case Kind::region:
        o << "[block " << s.i << (s.i < kBlocksA ? " A" : " B") << (s.i == kAltBlock ? " alt" : "")
          << (s.op ? " rows 1.." : "") << "]";
        break;
      default:
        if (s.i) o << "[i " << s.i << "]";
        if (s.f != 0) o << "[f " << num(s.f) << "]";
        break;
    }
    o << "(v" << s.a << ",v" << s.b << ",v" << s.c << ")";
  }
}

}  // namespace

std::string describe(const Program& p) {
  std::ostringstream o;
  o << "D=" << p.width << " pick_b=" << p.pick_b << " class=" << p.class_name << " aux=v" << p.aux << ":";
  describe_steps(o, p.steps);
  if (p.blocks)
    for (std::size_t b = 0; b < 2; ++b) {
      o << " | body "
        << "AB"[b] << " pick_b=" << p.body_pick_b[b] << ":";
      describe_steps(o, p.body[b]);
    }
  return o.str();
}

Layers::Layers(int width, double branch_offset) : width_(width), branch_offset_(branch_offset) {
  const int64_t d = width;
  sel_a_ = register_module("sel_a", std::make_shared<nn::Linear>(d, d));
  sel_b_ = register_module("sel_b", std::make_shared<nn::Linear>(d, d));
  up_ = register_module("up", std::make_shared<nn::Linear>(d, 2 * d));
  down_ = register_module("down", std::make_shared<nn::Linear>(2 * d, d, false));
  mat_ = register_parameter("mat", nn::new_parameter({d, d}));
  norm_w_ = register_parameter("norm_w", nn::new_parameter({d}));
  norm_b_ = register_parameter("norm_b", nn::new_parameter({d}));
  emb_ = register_parameter("emb", nn::new_parameter({kVocab, d}));
}

void Layers::init(std::uint64_t seed) {
  Rng r(seed);
  for (auto& [name, t] : named_parameters()) {
    std::vector<float> v(1);
    std::size_t n = 1;
    for (int64_t x : t.dims()) n *= static_cast<std::size_t>(x);
    v.resize(n);
    const double scale = t.dims().size() == 2 ? 1.0 / std::sqrt(static_cast<double>(t.dims()[1])) : 0.2;
    for (auto& e : v) e = static_cast<float>(r.uniform(-scale, scale) + (name == "norm_w" ? 1.0 : 0.0));
    t.copy_from(v);
  }
}

RandBlock::RandBlock(const Program& p, int shape, std::uint64_t weight_seed)
    : Layers(p.width, p.branch_offset),
      shape_(shape),
      steps_(p.body[static_cast<std::size_t>(shape)]),
      pick_b_(p.body_pick_b[static_cast<std::size_t>(shape)]) {
  init(weight_seed);
  if (shape_ == 1) {
    Rng r(mix(weight_seed, 0x7363616c65));
    std::vector<float> v(static_cast<std::size_t>(width_));
    for (auto& e : v) e = static_cast<float>(r.uniform(0.5, 1.5));
    scale_ = register_buffer("scale", Tensor::from_vector(v, {width_}));
  }
}

// The shapes are classes of their own (a region's signature names the
// module's class, never its other members: blocks of one class run one
// body).
std::string RandBlock::type_name() const { return shape_ ? "randtest::BlockB" : "randtest::BlockA"; }

Tensor RandBlock::forward(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& idx, const Tensor& kv,
                          double s, std::int64_t k) const {
  std::vector<Tensor> v{a, b};
  for (const Step& st : steps_) v.push_back(step(st, pick_b_, v, ids, idx, kv, s, k));
  return shape_ ? v.back() * scale_ : v.back();
}

Tensor RandBlockAlt::forward(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& idx, const Tensor& kv,
                             double s, std::int64_t k) const {
  return ops::tanh(RandBlock::forward(a, b, ids, idx, kv, s, k));
}

RandNet::RandNet(Program p, std::uint64_t weight_seed) : Layers(p.width, p.branch_offset), p_(std::move(p)) {
  init(weight_seed);
  // Registered after the method's own parameters have their values, so a
  // program of generators 1 and 2 has the weights it had before blocks.
  if (p_.blocks)
    for (int i = 0; i < kBlocks; ++i) {
      const std::uint64_t seed = mix(weight_seed, 0x626c6f636b + i);
      const int shape = i < kBlocksA ? 0 : 1;
      blocks_.push_back(
          register_module("block" + std::to_string(i), i == kAltBlock ? std::make_shared<RandBlockAlt>(p_, shape, seed)
                                                                      : std::make_shared<RandBlock>(p_, shape, seed)));
    }
}

std::string RandNet::type_name() const { return p_.class_name ? "randtest::NetB" : "randtest::Net"; }

Tensor RandNet::forward(const Tensor& x, const Tensor& y, const Tensor& ids, const Tensor& idx, const Tensor& kv,
                        double s, std::int64_t k) {
  return run(x, y, ids, idx, kv, s, k).back();
}

std::vector<Tensor> RandNet::forward_pair(const Tensor& x, const Tensor& y, const Tensor& ids, const Tensor& idx,
                                          const Tensor& kv, double s, std::int64_t k) {
  auto v = run(x, y, ids, idx, kv, s, k);
  return {v.back(), v[static_cast<std::size_t>(p_.aux)]};
}

std::vector<Tensor> RandNet::run(const Tensor& x, const Tensor& y, const Tensor& ids, const Tensor& idx,
                                 const Tensor& kv, double s, std::int64_t k) const {
  std::vector<Tensor> v{x, y};
  for (const Step& st : p_.steps) {
    if (st.kind != Kind::region) {
      v.push_back(step(st, p_.pick_b, v, ids, idx, kv, s, k));
      continue;
    }
    if (static_cast<std::size_t>(st.i) >= blocks_.size()) throw Error("a region step of a program without blocks");
    const RandBlock& blk = *blocks_[static_cast<std::size_t>(st.i)];
    const Tensor& a = v[static_cast<std::size_t>(st.a)];
    const Tensor& b = v[static_cast<std::size_t>(st.b)];
    if (st.op == 0) {
      v.push_back(nn::compile_region(blk, &RandBlock::forward, a, b, ids, idx, kv, s, k));
      continue;
    }
    // Over the sequence without its first row (a symbolic size S - 1: the
    // block's body for another signature), the row put back in front.
    auto tail = [](const Tensor& t) { return t.slice(1, 1, t.size(1)); };
    Tensor r = nn::compile_region(blk, &RandBlock::forward, tail(a), tail(b), tail(ids), tail(idx), kv, s, k);
    v.push_back(ops::concat({a.slice(1, 0, 1), r}, 1));
  }
  return v;
}

Tensor Layers::step(const Step& st, bool pick_b, const std::vector<Tensor>& v, const Tensor& ids, const Tensor& idx,
                    const Tensor& kv, double s, std::int64_t k) const {
  const Tensor& a = v[static_cast<std::size_t>(st.a)];
  const Tensor& b = v[static_cast<std::size_t>(st.b)];
  const Tensor& c = v[static_cast<std::size_t>(st.c)];
  const int64_t d = width_;
  auto act = [](int op, const Tensor& t) { return op == 0 ? ops::gelu(t) : op == 1 ? ops::silu(t) : ops::relu(t); };
  auto abs1 = [](const Tensor& t) { return ops::unary(Op::abs, t) + 1.0; };
  // [B, S, H, D/H] from [B, S, D].
  auto heads = [&](const Tensor& t, int h) {
    return ops::reshape(t, Shape{t.size(0), t.size(1), SymExpr(h), SymExpr(d / h)});
  };
  switch (st.kind) {
    case Kind::unary:
      switch (st.op) {
        case 0: return ops::relu(a);
        case 1: return ops::gelu(a);
        case 2: return ops::silu(a);
        case 3: return ops::sigmoid(a);
        case 4: return ops::tanh(a);
        case 5: return ops::neg(a);
        case 6: return ops::unary(Op::abs, a);
        case 7: return ops::unary(Op::sin, a);
        case 8: return ops::unary(Op::cos, a);
        case 9: return ops::exp(ops::tanh(a));
        case 10: return ops::unary(Op::sqrt, abs1(a));
        case 11: return ops::unary(Op::log, abs1(a));
        case 12: return ops::rsqrt(abs1(a));
        default: return ops::unary(Op::reciprocal, abs1(a));
      }
    case Kind::binary:
      switch (st.op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / abs1(b);
        case 4: return ops::maximum(a, b);
        case 5: return ops::minimum(a, b);
        case 6: return ops::pow(ops::sigmoid(a) + 0.5, ops::tanh(b));
        default: return ops::where(ops::ge(a, b), a, b);
      }
    case Kind::scalar_const:
      switch (st.op) {
        case 0: return std::fabs(st.f) < kTiny ? (a * st.f) * kTinyScale : a * st.f;
        case 1: return a + st.f;
        case 2: return a - st.f;
        default: return a / st.f;
      }
    case Kind::scalar_arg:
      if (st.op == 1) return a + s;
      return std::fabs(s) < kTiny ? (a * s) * kTinyScale : a * s;
    case Kind::full_const: {
      Tensor f = ops::full(a.shape(), st.f);
      return a + (std::fabs(st.f) < kTiny ? f * kTinyScale : f);
    }
    case Kind::select_linear: return (pick_b ? sel_b_ : sel_a_)->forward(a);
    case Kind::up_down: return down_->forward(act(st.op, up_->forward(a)));
    case Kind::matmul_param: return ops::matmul(a, mat_);
    case Kind::flatten_linear:
      return ops::reshape(sel_a_->forward(ops::reshape(a, Shape{SymExpr(-1), SymExpr(d)})), a.shape());
    case Kind::attention_mm: {
      Tensor scores = ops::matmul(a, ops::transpose(b, 1, 2)) * (1.0 / std::sqrt(static_cast<double>(d)));
      return ops::matmul(ops::softmax(scores, -1), c);
    }
    case Kind::sdpa: {
      const int h = st.i;
      auto bhsd = [&](const Tensor& t) { return ops::permute(heads(t, h), {0, 2, 1, 3}); };
      Tensor o = ops::attention(bhsd(a), bhsd(b), bhsd(c), st.op == 1);
      return ops::reshape(ops::permute(o, {0, 2, 1, 3}), a.shape());
    }
    case Kind::rope: {
      Tensor pos =
          ops::expand(ops::reshape(ops::arange(a.size(1)), Shape{SymExpr(1), a.size(1)}), Shape{a.size(0), a.size(1)});
      return ops::reshape(ops::rope(heads(a, st.i), pos, st.f), a.shape());
    }
    case Kind::reduce: {
      Tensor r = st.op == 0   ? ops::sum(a, {st.i}, true)
                 : st.op == 1 ? ops::mean(a, {st.i}, true)
                              : ops::max(a, {st.i}, true);
      return a - r;
    }
    case Kind::argmax: return a + ops::cast(ops::argmax(b, -1, true), DType::f32) * 0.25;
    case Kind::softmax: return ops::softmax(a, st.i);
    case Kind::rmsnorm: return ops::rmsnorm(a, norm_w_, st.f);
    case Kind::layernorm: return ops::layernorm(a, norm_w_, norm_b_, st.f);
    case Kind::shuffle: {
      Tensor t = ops::reshape(a, Shape{a.size(0), a.size(1), SymExpr(d / 2), SymExpr(2)});
      return ops::reshape(ops::permute(t, {0, 1, 3, 2}), a.shape());
    }
    case Kind::transpose_sm: return ops::transpose(ops::softmax(ops::transpose(a, 1, 2), -1), 1, 2);
    case Kind::permute_rt: return ops::permute(act(st.op, ops::permute(a, {1, 0, 2})), {1, 0, 2});
    case Kind::slice_rotate: return ops::concat({a.slice(2, st.i, d), a.slice(2, 0, st.i)}, 2);
    case Kind::slice_seq_const: return a + ops::sum(a.slice(1, 0, st.i), {1}, true) * 0.5;
    case Kind::slice_seq_arg: return a - ops::mean(a.slice(1, 0, k), {1}, true);
    case Kind::seq_rotate: return ops::concat({a.slice(1, 1, a.size(1)), a.slice(1, 0, 1)}, 1);
    case Kind::concat_linear: return down_->forward(ops::concat({a, b}, 2));
    case Kind::gather: return ops::gather(a, idx, 2);
    case Kind::embedding: return a + ops::embedding(emb_, ids);
    case Kind::where: return ops::where(ops::gt(b, ops::scalar(st.f)), a, a * 0.5);
    case Kind::cast_rt: return a + ops::cast(ops::cast(b, st.op ? DType::bf16 : DType::f16), DType::f32);
    case Kind::expand_reduce: return a + ops::expand(ops::mean(a, {1}, true), a.shape());
    case Kind::kv_write: {
      Tensor pos =
          ops::expand(ops::reshape(ops::arange(a.size(1)), Shape{SymExpr(1), a.size(1)}), Shape{a.size(0), a.size(1)});
      Tensor cache = ops::buffer_update(kv, pos, a);
      return a + ops::expand(ops::mean(cache, {1}, true), a.shape());
    }
    case Kind::layer_reads: {
      // The reads never change the path (a debug read, an early-exit check
      // that does not fire): only the layers tell the pieces apart.
      Tensor h = ops::tanh(sel_a_->forward(a));
      if (ops::sum(h, {0, 1, 2}).item() > 1e30f) h = h * 0.0;
      h = ops::tanh(sel_b_->forward(h));
      if (ops::sum(h, {0, 1, 2}).item() > 1e30f) h = h * 0.0;
      return h;
    }
    case Kind::truth_branch:
      if (ops::gt(ops::sum(a, {0, 1, 2}), ops::scalar(st.f + branch_offset_))) return a * 2.0 - 1.0;
      return ops::tanh(a);
    case Kind::region:  // RandNet::run calls the block
    case Kind::kCount: break;
  }
  throw Error("unknown step kind");
}

}  // namespace npucache::randtest
