// A transformer block written by a user against the public headers: causal
// self-attention with rotary position embeddings and a KV cache updated in
// place, then an MLP, each behind an RMSNorm and a residual connection.
// prompt (a whole prompt) and decode (one token) are cached separately.
//
//   transformer_block [CACHE_DIR]
//
// Runs a 6-token prompt and 4 decode steps twice, once eagerly and once
// through the cached methods, each on its own KV cache, and compares every
// output and the KV caches. Exits 1 when they differ. A second run with the
// same CACHE_DIR loads both methods from the cache ("hit").
#include <npucache/npucache.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace npucache;

// The model's classes name it in the cache (model_info "example.Block_...").
namespace example {

struct BlockConfig {
  int64_t dim = 32;
  int64_t heads = 4;
  int64_t mlp_hidden = 64;
  int64_t max_seq = 16;  // KV cache length
  double rope_theta = 10000.0;
  int64_t head_dim() const { return dim / heads; }
};

// Parameters start at zero; fill them with deterministic values.
inline void fill(Tensor& t, float scale, float phase) {
  std::size_t n = 1;
  for (int64_t d : t.dims()) n *= static_cast<std::size_t>(d);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + phase);
  t.copy_from(v);
}

class Attention : public nn::Module {
 public:
  explicit Attention(const BlockConfig& c) : c_(c) {
    for (auto* p : {&q, &k, &v, &o}) *p = std::make_shared<nn::Linear>(c.dim, c.dim, /*bias=*/false);
    register_module("q_proj", q);
    register_module("k_proj", k);
    register_module("v_proj", v);
    register_module("o_proj", o);
  }

  // x [B, S, dim], positions [B, S] (i64); k_cache/v_cache [B, max_seq,
  // heads, head_dim] receive this call's keys and values at `positions`.
  Tensor forward(const Tensor& x, const Tensor& positions, const Tensor& k_cache, const Tensor& v_cache) const {
    const SymExpr B = x.size(0), S = x.size(1);
    const int64_t h = c_.heads, hd = c_.head_dim();
    Tensor qh = ops::rope(q->forward(x).reshape({B, S, h, hd}), positions, c_.rope_theta);
    Tensor kh = ops::rope(k->forward(x).reshape({B, S, h, hd}), positions, c_.rope_theta);
    Tensor vh = v->forward(x).reshape({B, S, h, hd});
    Tensor keys = ops::buffer_update(k_cache, positions, kh);  // in place
    Tensor vals = ops::buffer_update(v_cache, positions, vh);
    // Query i attends to the cached keys j <= positions[b, i].
    Tensor a = ops::attention(qh.permute({0, 2, 1, 3}), keys.permute({0, 2, 1, 3}), vals.permute({0, 2, 1, 3}),
                              /*causal=*/true, positions);
    return o->forward(a.permute({0, 2, 1, 3}).reshape({B, S, c_.dim}));
  }

  std::shared_ptr<nn::Linear> q, k, v, o;

 private:
  BlockConfig c_;
};

class Mlp : public nn::Module {
 public:
  explicit Mlp(const BlockConfig& c)
      : up(register_module("up", std::make_shared<nn::Linear>(c.dim, c.mlp_hidden))),
        down(register_module("down", std::make_shared<nn::Linear>(c.mlp_hidden, c.dim))) {}
  Tensor forward(const Tensor& x) const { return down->forward(ops::gelu(up->forward(x))); }
  std::shared_ptr<nn::Linear> up, down;
};

class Block : public nn::Module {
 public:
  explicit Block(const BlockConfig& c) : config(c) {
    attn_norm = register_module("attn_norm", std::make_shared<nn::RMSNorm>(c.dim));
    attn = register_module("attn", std::make_shared<Attention>(c));
    mlp_norm = register_module("mlp_norm", std::make_shared<nn::RMSNorm>(c.dim));
    mlp = register_module("mlp", std::make_shared<Mlp>(c));
    float phase = 0.0f;
    for (auto& [name, p] : named_parameters()) {
      const bool norm_weight = name.find("norm") != std::string::npos;
      fill(p, norm_weight ? 0.1f : 0.2f, phase += 1.0f);
      if (norm_weight) {  // around one, as a trained norm
        std::vector<float> w = p.to_vector();
        for (float& x : w) x += 1.0f;
        p.copy_from(w);
      }
    }
  }

  // x [B, S, dim]; kv = {k_cache, v_cache} (make_kv_cache), updated in place.
  Tensor forward(const Tensor& x, const Tensor& positions, const std::vector<Tensor>& kv) {
    Tensor h = x + attn->forward(attn_norm->forward(x), positions, kv.at(0), kv.at(1));
    return h + mlp->forward(mlp_norm->forward(h));
  }
  // One graph for prompts (S tokens), one for single-token decode steps.
  Tensor prompt(const Tensor& x, const Tensor& positions, const std::vector<Tensor>& kv) {
    return forward(x, positions, kv);
  }
  Tensor decode(const Tensor& x, const Tensor& position, const std::vector<Tensor>& kv) {
    return forward(x, position, kv);
  }

  std::vector<Tensor> make_kv_cache(int64_t batch) const {
    const int64_t n = batch * config.max_seq * config.dim;
    std::vector<Tensor> kv;
    for (int i = 0; i < 2; ++i)
      kv.push_back(Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(n), 0.0f),
                                       {batch, config.max_seq, config.heads, config.head_dim()}));
    return kv;
  }

  BlockConfig config;
  std::shared_ptr<nn::RMSNorm> attn_norm, mlp_norm;
  std::shared_ptr<Attention> attn;
  std::shared_ptr<Mlp> mlp;
};

}  // namespace example

namespace {

Tensor hidden(int64_t batch, int64_t seq, int64_t dim, float phase) {
  std::vector<float> v(static_cast<std::size_t>(batch * seq * dim));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11f * static_cast<float>(i) + phase);
  return Tensor::from_vector(v, {batch, seq, dim});
}

Tensor positions(int64_t batch, int64_t start, int64_t count) {
  std::vector<int64_t> p;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < count; ++i) p.push_back(start + i);
  return Tensor::from_vector_i64(p, {batch, count});
}

// Largest relative difference of two results.
double difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(double{x[i]} - y[i]) / (1.0 + std::fabs(double{y[i]})));
  return worst;
}

}  // namespace

int main(int argc, char** argv) try {
  constexpr double kTolerance = 1e-4;  // fused kernels sum in another order than eager ones
  constexpr int64_t kBatch = 2, kPrompt = 6, kSteps = 4;
  example::Block block{example::BlockConfig{}};
  CacheOptions options;
  options.cache_dir = argc > 1 ? argv[1] : "";
  options.compile.arg_names = {"x", "positions", "kv"};
  auto prompt = cache_compile(block, &example::Block::prompt, options);
  auto decode = cache_compile(block, &example::Block::decode, options);

  std::vector<Tensor> kv_eager = block.make_kv_cache(kBatch), kv_cached = block.make_kv_cache(kBatch);
  const int64_t dim = block.config.dim;
  double worst = 0;
  const Tensor x = hidden(kBatch, kPrompt, dim, 0.0f), pos = positions(kBatch, 0, kPrompt);
  worst = std::max(worst, difference(prompt(x, pos, kv_cached), block.prompt(x, pos, kv_eager)));
  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor t = hidden(kBatch, 1, dim, 1.0f + static_cast<float>(step));
    const Tensor p = positions(kBatch, kPrompt + step, 1);
    worst = std::max(worst, difference(decode(t, p, kv_cached), block.decode(t, p, kv_eager)));
  }
  for (std::size_t i = 0; i < kv_eager.size(); ++i) worst = std::max(worst, difference(kv_cached[i], kv_eager[i]));

  for (const auto* m : {&prompt, &decode}) {
    const CallStatus& s = m->status();
    std::printf("%s: %s (compiles %zu)%s%s\n", m == &prompt ? "prompt" : "decode",
                std::string(outcome_name(s.outcome)).c_str(), m->compiles(), s.reason.empty() ? "" : ", ",
                s.reason.c_str());
  }
  const bool ok = worst <= kTolerance;
  std::printf(
      "%d prompt tokens, %d decode steps, batch %d: cached and eager outputs and KV caches %s "
      "(largest relative difference %.2e)\n",
      static_cast<int>(kPrompt), static_cast<int>(kSteps), static_cast<int>(kBatch), ok ? "agree" : "DIFFER", worst);
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "transformer_block: %s\n", e.what());
  return 1;
}
