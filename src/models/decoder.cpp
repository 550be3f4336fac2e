// The Llama-family decoder: layers, stages, weights (decoder.h).
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/models/decoder.h>
#include <npucache/region.h>

#include "models/weights.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

namespace npucache::models {
namespace {

// Fills the parameters of a stage with deterministic values; does nothing
// for meta weights.
class Filler {
 public:
  Filler(const DecoderConfig& c, const StageRanks& r, Weights w) : c_(c), r_(r), real_(w == Weights::deterministic) {}
  // `t` is shard tp_rank along `axis` of the full [rows, cols] `name`
  // (axis -1: not sharded).
  void operator()(Tensor& t, const std::string& name, int64_t rows, int64_t cols, int axis, double scale) const {
    if (!real_ || !t.defined()) return;
    if (axis < 0)
      fill_shard(t, c_.seed, name, rows, cols, 0, 0, 1, scale);
    else
      fill_shard(t, c_.seed, name, rows, cols, axis, r_.tp_rank, r_.tp, scale);
  }

 private:
  const DecoderConfig& c_;
  const StageRanks& r_;
  bool real_;
};

std::string human(std::size_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (std::size_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / static_cast<double>(1ull << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / static_cast<double>(1ull << 20));
  return buf;
}

std::size_t bytes_of(const Tensor& t) {
  std::size_t n = dtype_size(t.dtype());
  for (int64_t d : t.dims()) n *= static_cast<std::size_t>(d);
  return n;
}

}  // namespace

class DecoderLayer : public nn::Module {
 public:
  DecoderLayer(const DecoderConfig& c, const StageRanks& r, int64_t index, const Filler& fill) : c_(c), tp_(r.tp) {
    const int64_t hd = c.head_dim();
    attn_norm = register_module("attn_norm", std::make_shared<nn::RMSNorm>(c.hidden, c.eps));
    q_proj =
        register_module("q_proj", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.heads * hd, r.tp, c.qkv_bias));
    k_proj = register_module("k_proj",
                             std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.kv_heads * hd, r.tp, c.qkv_bias));
    v_proj = register_module("v_proj",
                             std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.kv_heads * hd, r.tp, c.qkv_bias));
    o_proj = register_module("o_proj", std::make_shared<nn::RowParallelLinear>(c.heads * hd, c.hidden, r.tp, c.o_bias));
    mlp_norm = register_module("mlp_norm", std::make_shared<nn::RMSNorm>(c.hidden, c.eps));
    gate = register_module("gate", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.intermediate, r.tp));
    up = register_module("up", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.intermediate, r.tp));
    down = register_module("down", std::make_shared<nn::RowParallelLinear>(c.intermediate, c.hidden, r.tp));
    const std::string p = "layers." + std::to_string(index) + ".";
    const double s_in = 1.0 / std::sqrt(static_cast<double>(c.hidden));
    const double s_mid = 1.0 / std::sqrt(static_cast<double>(c.intermediate));
    fill(q_proj->weight, p + "q_proj.weight", c.heads * hd, c.hidden, 0, s_in);
    fill(k_proj->weight, p + "k_proj.weight", c.kv_heads * hd, c.hidden, 0, s_in);
    fill(v_proj->weight, p + "v_proj.weight", c.kv_heads * hd, c.hidden, 0, s_in);
    fill(o_proj->weight, p + "o_proj.weight", c.hidden, c.heads * hd, 1, s_in);
    fill(q_proj->bias, p + "q_proj.bias", c.heads * hd, 1, 0, s_in);
    fill(k_proj->bias, p + "k_proj.bias", c.kv_heads * hd, 1, 0, s_in);
    fill(v_proj->bias, p + "v_proj.bias", c.kv_heads * hd, 1, 0, s_in);
    fill(o_proj->bias, p + "o_proj.bias", c.hidden, 1, -1, s_in);
    fill(gate->weight, p + "gate.weight", c.intermediate, c.hidden, 0, s_in);
    fill(up->weight, p + "up.weight", c.intermediate, c.hidden, 0, s_in);
    fill(down->weight, p + "down.weight", c.hidden, c.intermediate, 1, s_mid);
  }

  // x [B, S, hidden]; k_cache/v_cache [B, max_seq, kv_heads/tp, hd].
  Tensor forward(const Tensor& x, const Tensor& positions, const Tensor& k_cache, const Tensor& v_cache) const {
    const int64_t hd = c_.head_dim();
    const int64_t hq = c_.heads / tp_, hkv = c_.kv_heads / tp_;
    const SymExpr B = x.size(0), S = x.size(1);
    Tensor h = attn_norm->forward(x);
    Tensor q = ops::rope(q_proj->forward(h).reshape({B, S, hq, hd}), positions, c_.rope_theta);
    Tensor k = ops::rope(k_proj->forward(h).reshape({B, S, hkv, hd}), positions, c_.rope_theta);
    Tensor v = v_proj->forward(h).reshape({B, S, hkv, hd});
    Tensor kc = ops::buffer_update(k_cache, positions, k);
    Tensor vc = ops::buffer_update(v_cache, positions, v);
    Tensor a =
        ops::attention(q.permute({0, 2, 1, 3}), kc.permute({0, 2, 1, 3}), vc.permute({0, 2, 1, 3}), true, positions);
    Tensor attn = o_proj->forward(a.permute({0, 2, 1, 3}).reshape({B, S, hq * hd}));
    Tensor x2 = x + attn;
    Tensor m = mlp_norm->forward(x2);
    return x2 + down->forward(ops::silu(gate->forward(m)) * up->forward(m));
  }

  std::shared_ptr<nn::RMSNorm> attn_norm, mlp_norm;
  std::shared_ptr<nn::ColumnParallelLinear> q_proj, k_proj, v_proj, gate, up;
  std::shared_ptr<nn::RowParallelLinear> o_proj, down;

 private:
  DecoderConfig c_;
  int64_t tp_;
};

StageMemory stage_memory(const DecoderConfig& config, const StageRanks& ranks, int64_t batch) {
  Decoder meta(config, ranks, Weights::meta);
  StageMemory m;
  std::set<const void*> seen;  // a tied parameter counts once
  for (const auto& [name, t] : meta.named_parameters())
    if (seen.insert(t.impl().get()).second) m.weights += bytes_of(t);
  for (const Tensor& t : meta.make_kv_cache(batch)) m.kv_cache += bytes_of(t);
  return m;
}

Decoder::Decoder(const DecoderConfig& config, const StageRanks& ranks, Weights weights)
    : config_(config), ranks_(ranks), weights_(weights) {
  config_.validate(ranks.tp, ranks.pp);
  if (ranks.tp_rank < 0 || ranks.tp_rank >= ranks.tp || ranks.pp_rank < 0 || ranks.pp_rank >= ranks.pp)
    throw ConfigError(config_.name + ": ranks (tp_rank " + std::to_string(ranks.tp_rank) + ", pp_rank " +
                      std::to_string(ranks.pp_rank) + ") outside tp = " + std::to_string(ranks.tp) +
                      ", pp = " + std::to_string(ranks.pp));
  range_ = stage_layers(config_.layers, ranks.pp, ranks.pp_rank);
  if (weights == Weights::deterministic) {
    const StageMemory need = stage_memory(config_, ranks_);
    Device& dev = Platform::get().device(current_device());
    const std::size_t capacity = dev.properties().memory_capacity;
    const std::size_t in_use = dev.memory_stats().allocated;
    const std::size_t free = capacity > in_use ? capacity - in_use : 0;
    if (need.total() > free)
      throw OutOfMemoryError(
          config_.name + " stage " + std::to_string(ranks.pp_rank) + " of pp " + std::to_string(ranks.pp) + " at tp " +
          std::to_string(ranks.tp) + " needs " + human(need.total()) + " of device memory to run with real weights (" +
          human(need.weights) + " of weights, " + human(need.kv_cache) + " of KV cache), more than the " + human(free) +
          " free on device " + std::to_string(dev.id()) + " (capacity " + human(capacity) +
          ", NPUCACHE_SIM_DEVICE_MEMORY); shard it over more ranks (tp x pp), raise NPUCACHE_SIM_DEVICE_MEMORY, "
          "or build it with meta weights to trace, compile and cache it without running (npucache warmup)");
  }
  std::optional<nn::MetaScope> meta;
  if (weights == Weights::meta) meta.emplace();
  const Filler fill(config_, ranks_, weights);
  const int64_t H = config_.hidden, V = config_.vocab;
  if (first_stage()) {
    embed_ = register_module("embed_tokens", std::make_shared<nn::VocabParallelEmbedding>(V, H, ranks.tp));
    fill(embed_->weight, "embed_tokens.weight", V, H, 0, 1.0);
  }
  for (int64_t i = 0; i < range_.count; ++i)
    layers_.push_back(std::make_shared<DecoderLayer>(config_, ranks_, range_.first + i, fill));
  struct LayerList : nn::Module {
    explicit LayerList(const std::vector<std::shared_ptr<DecoderLayer>>& ls, int64_t first) {
      for (std::size_t i = 0; i < ls.size(); ++i)
        register_module(std::to_string(first + static_cast<int64_t>(i)), ls[i]);
    }
  };
  register_module("layers", std::make_shared<LayerList>(layers_, range_.first));
  if (last_stage()) {
    norm_ = register_module("norm", std::make_shared<nn::RMSNorm>(H, config_.eps));
    // A tied head on the embedding's stage uses the embedding's shard (the
    // same rows of the same matrix); on another stage it holds a copy.
    if (!(config_.tie_word_embeddings && first_stage())) {
      head_ = register_module("lm_head", std::make_shared<nn::ColumnParallelLinear>(H, V, ranks.tp, false, true));
      if (config_.tie_word_embeddings)
        fill(head_->weight, "embed_tokens.weight", V, H, 0, 1.0);
      else
        fill(head_->weight, "lm_head.weight", V, H, 0, 1.0 / std::sqrt(static_cast<double>(H)));
    }
  }
}

std::vector<Tensor> Decoder::make_kv_cache(int64_t batch) const {
  const int64_t hkv = config_.kv_heads / ranks_.tp;
  std::vector<int64_t> dims{batch, config_.max_seq, hkv, config_.head_dim()};
  std::vector<Tensor> kv;
  if (weights_ == Weights::meta) {
    for (std::size_t i = 0; i < 2 * layers_.size(); ++i) kv.push_back(Tensor::meta(dims));
    return kv;
  }
  std::vector<float> zeros(static_cast<std::size_t>(batch * config_.max_seq * hkv * config_.head_dim()), 0.0f);
  for (std::size_t i = 0; i < 2 * layers_.size(); ++i) kv.push_back(Tensor::from_vector(zeros, dims));
  return kv;
}

Tensor Decoder::head(const Tensor& h) const {
  if (head_) return head_->forward(h);
  Tensor logits = ops::linear(h, embed_->weight);  // tied: [vocab/tp, hidden] as the head's shard
  return ranks_.tp > 1 ? ops::all_gather(logits, "tp", -1, ranks_.tp) : logits;
}

Tensor Decoder::run(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv) {
  if (kv.size() != 2 * layers_.size())
    throw ConfigError(config_.name + " stage " + std::to_string(ranks_.pp_rank) + " needs " +
                      std::to_string(2 * layers_.size()) + " kv tensors (keys and values of " +
                      std::to_string(layers_.size()) + " layers), got " + std::to_string(kv.size()) +
                      "; use make_kv_cache");
  Tensor h = first_stage() ? embed_->forward(tokens)
                           : ops::recv({tokens.size(0), tokens.size(1), config_.hidden}, DType::f32, "prev");
  // Each layer is a compile region: traced and compiled once per shape,
  // linked in at every layer with that layer's weights.
  for (std::size_t i = 0; i < layers_.size(); ++i)
    h = nn::compile_region(*layers_[i], &DecoderLayer::forward, h, positions, kv[2 * i], kv[2 * i + 1]);
  if (!last_stage()) return ops::send(h, "next");
  return head(norm_->forward(h));
}

Tensor Decoder::prompt(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv) {
  return run(tokens, positions, kv);
}

Tensor Decoder::decode(const Tensor& token, const Tensor& position, const std::vector<Tensor>& kv) {
  return run(token, position, kv);
}

}  // namespace npucache::models
