#include <npucache/error.h>
#include <npucache/models/models.h>

#include "models/weights.h"

#include <cmath>

namespace npucache::models {

TinyLlamaConfig TinyLlamaConfig::large() {
  TinyLlamaConfig c;
  c.vocab = 1024;
  c.hidden = 256;
  c.layers = 8;
  c.heads = 8;
  c.kv_heads = 4;
  c.intermediate = 512;
  c.max_seq = 128;
  return c;
}

void TinyLlamaConfig::validate(int tp, int pp) const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError("tiny-llama: " + what);
  };
  need(tp >= 1 && pp >= 1, "tp and pp must be >= 1");
  need(hidden % heads == 0, "hidden size " + std::to_string(hidden) + " is not divisible by heads " + std::to_string(heads));
  need(head_dim() % 2 == 0, "head dim must be even for rotary embeddings");
  need(heads % kv_heads == 0, "heads must be a multiple of kv_heads");
  need(heads % tp == 0 && kv_heads % tp == 0,
       "heads (" + std::to_string(heads) + ") and kv_heads (" + std::to_string(kv_heads) +
           ") must be divisible by tp = " + std::to_string(tp));
  need(intermediate % tp == 0, "intermediate size must be divisible by tp");
  need(vocab % tp == 0, "vocabulary size must be divisible by tp");
  need(layers % pp == 0, "layer count " + std::to_string(layers) + " is not divisible by pp = " +
                             std::to_string(pp) + "; choose pp dividing it");
}

StageRanks stage_ranks(const Communicator& comm) {
  const ParallelLayout& l = comm.layout();
  return StageRanks{l.tp, l.pp, comm.rank(GroupRole::tp), comm.rank(GroupRole::pp)};
}

class DecoderLayer : public nn::Module {
 public:
  DecoderLayer(const TinyLlamaConfig& c, const StageRanks& r, int64_t index) : c_(c), tp_(r.tp) {
    const int64_t hd = c.head_dim();
    attn_norm = register_module("attn_norm", std::make_shared<nn::RMSNorm>(c.hidden, c.eps));
    q_proj = register_module("q_proj", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.heads * hd, r.tp));
    k_proj = register_module("k_proj", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.kv_heads * hd, r.tp));
    v_proj = register_module("v_proj", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.kv_heads * hd, r.tp));
    o_proj = register_module("o_proj", std::make_shared<nn::RowParallelLinear>(c.heads * hd, c.hidden, r.tp));
    mlp_norm = register_module("mlp_norm", std::make_shared<nn::RMSNorm>(c.hidden, c.eps));
    gate = register_module("gate", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.intermediate, r.tp));
    up = register_module("up", std::make_shared<nn::ColumnParallelLinear>(c.hidden, c.intermediate, r.tp));
    down = register_module("down", std::make_shared<nn::RowParallelLinear>(c.intermediate, c.hidden, r.tp));
    const std::string p = "layers." + std::to_string(index) + ".";
    const double s_in = 1.0 / std::sqrt(static_cast<double>(c.hidden));
    const double s_mid = 1.0 / std::sqrt(static_cast<double>(c.intermediate));
    fill_shard(q_proj->weight, c.seed, p + "q_proj.weight", c.heads * hd, c.hidden, 0, r.tp_rank, r.tp, s_in);
    fill_shard(k_proj->weight, c.seed, p + "k_proj.weight", c.kv_heads * hd, c.hidden, 0, r.tp_rank, r.tp, s_in);
    fill_shard(v_proj->weight, c.seed, p + "v_proj.weight", c.kv_heads * hd, c.hidden, 0, r.tp_rank, r.tp, s_in);
    fill_shard(o_proj->weight, c.seed, p + "o_proj.weight", c.hidden, c.heads * hd, 1, r.tp_rank, r.tp, s_in);
    fill_shard(gate->weight, c.seed, p + "gate.weight", c.intermediate, c.hidden, 0, r.tp_rank, r.tp, s_in);
    fill_shard(up->weight, c.seed, p + "up.weight", c.intermediate, c.hidden, 0, r.tp_rank, r.tp, s_in);
    fill_shard(down->weight, c.seed, p + "down.weight", c.hidden, c.intermediate, 1, r.tp_rank, r.tp, s_mid);
  }

  // x [B, S, hidden]; k_cache/v_cache [B, max_seq, kv_heads/tp, hd].
  Tensor forward(const Tensor& x, const Tensor& positions, const Tensor& k_cache,
                 const Tensor& v_cache) const {
    const int64_t hd = c_.head_dim();
    const int64_t hq = c_.heads / tp_, hkv = c_.kv_heads / tp_;
    const SymExpr B = x.size(0), S = x.size(1);
    Tensor h = attn_norm->forward(x);
    Tensor q = ops::rope(q_proj->forward(h).reshape({B, S, hq, hd}), positions, c_.rope_theta);
    Tensor k = ops::rope(k_proj->forward(h).reshape({B, S, hkv, hd}), positions, c_.rope_theta);
    Tensor v = v_proj->forward(h).reshape({B, S, hkv, hd});
    Tensor kc = ops::buffer_update(k_cache, positions, k);
    Tensor vc = ops::buffer_update(v_cache, positions, v);
    Tensor a = ops::attention(q.permute({0, 2, 1, 3}), kc.permute({0, 2, 1, 3}),
                              vc.permute({0, 2, 1, 3}), true, positions);
    Tensor attn = o_proj->forward(a.permute({0, 2, 1, 3}).reshape({B, S, hq * hd}));
    Tensor x2 = x + attn;
    Tensor m = mlp_norm->forward(x2);
    return x2 + down->forward(ops::silu(gate->forward(m)) * up->forward(m));
  }

  std::shared_ptr<nn::RMSNorm> attn_norm, mlp_norm;
  std::shared_ptr<nn::ColumnParallelLinear> q_proj, k_proj, v_proj, gate, up;
  std::shared_ptr<nn::RowParallelLinear> o_proj, down;

 private:
  TinyLlamaConfig c_;
  int64_t tp_;
};

TinyLlama::TinyLlama(const TinyLlamaConfig& config, const StageRanks& ranks)
    : config_(config), ranks_(ranks) {
  config_.validate(ranks.tp, ranks.pp);
  if (ranks.tp_rank < 0 || ranks.tp_rank >= ranks.tp || ranks.pp_rank < 0 || ranks.pp_rank >= ranks.pp)
    throw ConfigError("tiny-llama: ranks (tp_rank " + std::to_string(ranks.tp_rank) + ", pp_rank " +
                      std::to_string(ranks.pp_rank) + ") outside tp = " + std::to_string(ranks.tp) +
                      ", pp = " + std::to_string(ranks.pp));
  const int64_t per_stage = config_.layers / ranks.pp;
  first_layer_ = per_stage * ranks.pp_rank;
  if (first_stage()) {
    embed_ = register_module("embed_tokens",
                             std::make_shared<nn::VocabParallelEmbedding>(config_.vocab, config_.hidden, ranks.tp));
    fill_shard(embed_->weight, config_.seed, "embed_tokens.weight", config_.vocab, config_.hidden, 0,
               ranks.tp_rank, ranks.tp, 1.0);
  }
  for (int64_t i = 0; i < per_stage; ++i) {
    auto layer = std::make_shared<DecoderLayer>(config_, ranks, first_layer_ + i);
    layers_.push_back(layer);
  }
  struct LayerList : nn::Module {
    explicit LayerList(const std::vector<std::shared_ptr<DecoderLayer>>& ls, int64_t first) {
      for (std::size_t i = 0; i < ls.size(); ++i)
        register_module(std::to_string(first + static_cast<int64_t>(i)), ls[i]);
    }
  };
  register_module("layers", std::make_shared<LayerList>(layers_, first_layer_));
  if (last_stage()) {
    norm_ = register_module("norm", std::make_shared<nn::RMSNorm>(config_.hidden, config_.eps));
    head_ = register_module("lm_head", std::make_shared<nn::ColumnParallelLinear>(
                                           config_.hidden, config_.vocab, ranks.tp, false, true));
    fill_shard(head_->weight, config_.seed, "lm_head.weight", config_.vocab, config_.hidden, 0,
               ranks.tp_rank, ranks.tp, 1.0 / std::sqrt(static_cast<double>(config_.hidden)));
  }
}

std::vector<Tensor> TinyLlama::make_kv_cache(int64_t batch) const {
  const int64_t hkv = config_.kv_heads / ranks_.tp;
  std::vector<int64_t> dims{batch, config_.max_seq, hkv, config_.head_dim()};
  std::vector<float> zeros(static_cast<std::size_t>(batch * config_.max_seq * hkv * config_.head_dim()), 0.0f);
  std::vector<Tensor> kv;
  for (std::size_t i = 0; i < 2 * layers_.size(); ++i) kv.push_back(Tensor::from_vector(zeros, dims));
  return kv;
}

Tensor TinyLlama::run(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv) {
  if (kv.size() != 2 * layers_.size())
    throw ConfigError("tiny-llama stage " + std::to_string(ranks_.pp_rank) + " needs " +
                      std::to_string(2 * layers_.size()) + " kv tensors (keys and values of " +
                      std::to_string(layers_.size()) + " layers), got " + std::to_string(kv.size()) +
                      "; use make_kv_cache");
  Tensor h = first_stage()
                 ? embed_->forward(tokens)
                 : ops::recv({tokens.size(0), tokens.size(1), config_.hidden}, DType::f32, "prev");
  for (std::size_t i = 0; i < layers_.size(); ++i) h = layers_[i]->forward(h, positions, kv[2 * i], kv[2 * i + 1]);
  if (!last_stage()) return ops::send(h, "next");
  return head_->forward(norm_->forward(h));
}

Tensor TinyLlama::prompt(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv) {
  return run(tokens, positions, kv);
}

Tensor TinyLlama::decode(const Tensor& token, const Tensor& position, const std::vector<Tensor>& kv) {
  return run(token, position, kv);
}

}  // namespace npucache::models
