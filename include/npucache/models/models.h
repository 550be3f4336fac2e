// Reference models.
//
// - SeedExample: the seed document's model: InputMeta{data, is_prompt} and a
//   list of kv tensors, two Linear(2, 1) with all parameters one,
//   forward = linear2(x.data) + linear2(kv[0]), wrapped by prompt/decode.
// - SimpleMLP: the seed's Linear(128, 256) -> relu -> Linear(256, 10).
// - TinyLlama (the default model): a decoder-only transformer (token
//   embedding, RMSNorm, rotary attention with grouped KV heads, SwiGLU MLP,
//   LM head) sharded for tensor parallelism (Megatron column/row linears,
//   vocabulary-parallel embedding) and pipeline parallelism (contiguous layer
//   ranges; first stage owns the embedding, last the norm and head;
//   activations go to the next stage). Weights are deterministic from
//   config.seed: every rank builds its shard of the same full model.
//
// Every rank of a (tp, pp) layout builds its model from the same config plus
// its ranks, so the tensor-parallel ranks of one stage trace equal graphs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <npucache/runtime/communicator.h>
#include <npucache/module.h>

namespace npucache::models {

struct InputMeta {
  Tensor data;
  bool is_prompt = true;
  template <class V>
  void visit(V& v) {
    v("data", data);
    v("is_prompt", is_prompt);
  }
};

class SeedExample : public nn::Module {
 public:
  SeedExample();
  std::string type_name() const override { return "Model"; }
  Tensor forward(const InputMeta& x, const std::vector<Tensor>& kv);
  Tensor prompt(const InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv); }
  Tensor decode(const InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv); }
  std::shared_ptr<nn::Linear> linear1, linear2;
};

class SimpleMLP : public nn::Module {
 public:
  explicit SimpleMLP(uint64_t seed = 7);
  Tensor forward(const Tensor& x);
  std::shared_ptr<nn::Linear> fc1, fc2;
};

struct TinyLlamaConfig {
  int64_t vocab = 256;
  int64_t hidden = 64;
  int64_t layers = 4;  // divisible by pp = 1, 2 and 4
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t intermediate = 128;
  int64_t max_seq = 64;
  double rope_theta = 10000.0;
  double eps = 1e-5;
  uint64_t seed = 1234;

  int64_t head_dim() const { return hidden / heads; }
  // 4x wider and twice as deep as the default: larger graphs and artifacts.
  static TinyLlamaConfig large();
  // Throws ConfigError naming the first inconsistent size.
  void validate(int tp, int pp) const;
};

struct StageRanks {
  int tp = 1;
  int pp = 1;
  int tp_rank = 0;
  int pp_rank = 0;
};

class DecoderLayer;

class TinyLlama : public nn::Module {
 public:
  TinyLlama(const TinyLlamaConfig& config, const StageRanks& ranks);

  // tokens/positions [B, S] i64; kv: 2 tensors per local layer (keys then
  // values), [B, max_seq, kv_heads/tp, head_dim], updated in place.
  // The last stage returns logits [B, S, vocab]; other stages send their
  // hidden states to the next stage and return them.
  Tensor prompt(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv);
  Tensor decode(const Tensor& token, const Tensor& position, const std::vector<Tensor>& kv);

  std::vector<Tensor> make_kv_cache(int64_t batch) const;
  bool first_stage() const { return ranks_.pp_rank == 0; }
  bool last_stage() const { return ranks_.pp_rank == ranks_.pp - 1; }
  const TinyLlamaConfig& config() const { return config_; }
  const StageRanks& ranks() const { return ranks_; }

 private:
  Tensor run(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv);
  TinyLlamaConfig config_;
  StageRanks ranks_;
  int64_t first_layer_ = 0;
  std::shared_ptr<nn::VocabParallelEmbedding> embed_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::shared_ptr<nn::ColumnParallelLinear> head_;
};

// The stage ranks of `comm`'s rank.
StageRanks stage_ranks(const Communicator& comm);

struct GenerationResult {
  std::vector<int64_t> tokens;            // generated tokens (batch row 0)
  std::vector<std::vector<float>> logits; // last-position logits per step (last stage only)
  double time_to_first_token_s = 0;
  std::vector<double> token_latency_s;    // decode steps
};

// Greedy generation of `new_tokens` tokens after `prompt` (batch 1) on every
// rank of `comm`. The next token is chosen on the last stage and broadcast
// over the pp group. `prompt_fn`/`decode_fn` default to the model's eager
// methods; cached or compiled callables may be passed instead.
// One model call (tokens, positions, kv) -> logits or hidden states.
using StepFn = std::function<Tensor(const Tensor&, const Tensor&, const std::vector<Tensor>&)>;
GenerationResult greedy_generate(TinyLlama& model, const std::vector<int64_t>& prompt,
                                 int new_tokens, Communicator& comm, StepFn prompt_fn = nullptr,
                                 StepFn decode_fn = nullptr);

}  // namespace npucache::models
