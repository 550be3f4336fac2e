// The decoder-only transformer of the Llama family (Llama 2/3, Mistral,
// Qwen2), sharded for tensor and pipeline parallelism, with real
// (deterministic) or meta weights.
//
// Model: token embedding, per layer RMSNorm -> rotary attention with
// grouped KV heads (optional q/k/v bias as Qwen2, o bias as Llama's
// attention_bias) -> residual -> RMSNorm -> SwiGLU MLP -> residual, final
// RMSNorm and LM head (optionally tied to the embedding). DecoderConfig{}
// is tiny-llama, the project's default model; hf_config.h makes configs
// from a Hugging Face config.json.
//
// Tensor parallelism (Megatron): q/k/v, gate and up are column-parallel,
// o and down row-parallel, the embedding vocabulary-parallel and the head
// column-parallel with its output gathered. Each rank holds whole heads:
// tp must divide heads, kv heads, intermediate size and vocabulary.
//
// Pipeline parallelism: stage s holds the contiguous layer range
// stage_layers(layers, pp, s). When pp does not divide the layer count the
// first (layers % pp) stages hold one layer more than the others (Megatron
// with uneven layers, the remainder spread over the first stages): the
// last stage, which also holds the final norm and the LM head, is never
// the deepest. Stages of equal role (first, middle, last) and equal layer
// count trace equal graphs; so a job's unique stage graphs per method are
// the distinct (first?, last?, layer count) triples of its stages.
//
// Weights: Weights::deterministic fills every parameter from (seed, full
// parameter name, element index) -- each rank its shard of the same full
// model, so any layout computes the same function -- after checking that
// the stage fits the current device (OutOfMemoryError naming the memory
// needed otherwise). Weights::meta creates meta parameters (Tensor::meta):
// no weight memory at any size; the model traces, compiles and caches
// (CompiledMethod::prepare) but running it throws MetaTensorError.
//
// Every rank of a (tp, pp) layout builds its model from the same config
// plus its ranks; the tensor-parallel ranks of one stage trace equal graphs.
#pragma once

#include <npucache/export.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <npucache/module.h>
#include <npucache/runtime/communicator.h>

namespace npucache::models {

struct NPUCACHE_API DecoderConfig {
  std::string name = "tiny-llama";                // in messages and reports
  std::string architecture = "LlamaForCausalLM";  // the Hugging Face class
  int64_t vocab = 256;                            // vocab_size
  int64_t hidden = 64;                            // hidden_size
  int64_t layers = 4;                             // num_hidden_layers
  int64_t heads = 4;                              // num_attention_heads
  int64_t kv_heads = 2;                           // num_key_value_heads
  int64_t intermediate = 128;                     // intermediate_size
  // KV-cache length: max_position_embeddings, capped by a sliding window.
  int64_t max_seq = 64;
  double rope_theta = 10000.0;
  double eps = 1e-5;                 // rms_norm_eps
  bool qkv_bias = false;             // q/k/v projections with bias (Qwen2)
  bool o_bias = false;               // o projection with bias (Llama attention_bias)
  bool tie_word_embeddings = false;  // the LM head is the embedding matrix
  uint64_t seed = 1234;              // of the deterministic weights

  int64_t head_dim() const { return hidden / heads; }
  // tiny-llama 4x wider and twice as deep: larger graphs and artifacts.
  static DecoderConfig large();
  // Upper bounds, checked before anything is built or allocated: each far
  // above the largest published models (hidden 16384, intermediate 53248,
  // 126 layers, 128 heads, 256k vocabularies, 1M-token contexts), so a
  // value past one is a mistake, not a model.
  static constexpr int64_t kMaxVocab = int64_t{1} << 23;
  static constexpr int64_t kMaxHidden = int64_t{1} << 17;
  static constexpr int64_t kMaxLayers = 4096;
  static constexpr int64_t kMaxHeads = 4096;
  static constexpr int64_t kMaxIntermediate = int64_t{1} << 19;
  static constexpr int64_t kMaxSeq = int64_t{1} << 23;

  // Throws ConfigError naming the first inconsistent or impossible size by
  // its config.json field (and the tp or pp that does not divide it).
  void validate(int tp, int pp) const;
};

// The names the project used before the family was generalised.
using TinyLlamaConfig = DecoderConfig;

struct StageRanks {
  int tp = 1;
  int pp = 1;
  int tp_rank = 0;
  int pp_rank = 0;
};

// The stage ranks of `comm`'s rank.
NPUCACHE_API StageRanks stage_ranks(const Communicator& comm);

// Layers [first, first + count) of a pipeline stage.
struct LayerRange {
  int64_t first = 0;
  int64_t count = 0;
};
// Stage `stage` of `pp` over `layers` layers: floor(layers / pp) each, one
// more on each of the first layers % pp stages. Throws ConfigError when a
// stage would get no layer or the stage is out of range.
NPUCACHE_API LayerRange stage_layers(int64_t layers, int pp, int stage);

enum class Weights {
  deterministic,  // real memory, values from (seed, name, index)
  meta,           // shapes only: trace, compile and cache; never run
};

// Device memory a stage needs to run with real weights.
struct StageMemory {
  std::size_t weights = 0;   // its parameter shards
  std::size_t kv_cache = 0;  // make_kv_cache(batch)
  std::size_t total() const { return weights + kv_cache; }
};
// Computed from the stage's meta model (no weight memory is allocated).
NPUCACHE_API StageMemory stage_memory(const DecoderConfig& config, const StageRanks& ranks, int64_t batch = 1);

class DecoderLayer;

class NPUCACHE_API Decoder : public nn::Module {
 public:
  // Throws ConfigError for an invalid config or ranks; with real weights,
  // OutOfMemoryError naming the memory the stage needs when it exceeds the
  // current device's free memory (NPUCACHE_SIM_DEVICE_MEMORY).
  Decoder(const DecoderConfig& config, const StageRanks& ranks, Weights weights = Weights::deterministic);

  // tokens/positions [B, S] i64; kv: 2 tensors per local layer (keys then
  // values), [B, max_seq, kv_heads/tp, head_dim], updated in place.
  // The last stage returns logits [B, S, vocab]; other stages send their
  // hidden states to the next stage and return them.
  Tensor prompt(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv);
  Tensor decode(const Tensor& token, const Tensor& position, const std::vector<Tensor>& kv);

  // Zeroed KV caches of this stage; meta tensors when the weights are meta.
  std::vector<Tensor> make_kv_cache(int64_t batch) const;
  bool first_stage() const { return ranks_.pp_rank == 0; }
  bool last_stage() const { return ranks_.pp_rank == ranks_.pp - 1; }
  const DecoderConfig& config() const { return config_; }
  const StageRanks& ranks() const { return ranks_; }
  Weights weights() const { return weights_; }
  LayerRange layer_range() const { return range_; }

 private:
  NPUCACHE_LOCAL Tensor run(const Tensor& tokens, const Tensor& positions, const std::vector<Tensor>& kv);
  NPUCACHE_LOCAL Tensor head(const Tensor& h) const;
  DecoderConfig config_;
  StageRanks ranks_;
  Weights weights_;
  LayerRange range_;
  std::shared_ptr<nn::VocabParallelEmbedding> embed_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::shared_ptr<nn::ColumnParallelLinear> head_;  // null when tied to embed_ on this stage
};

using TinyLlama = Decoder;

}  // namespace npucache::models
