// Reference models.
//
// - SeedExample: the seed document's model: InputMeta{data, is_prompt} and a
//   list of kv tensors, two Linear(2, 1) with all parameters one,
//   forward = linear2(x.data) + linear2(kv[0]), wrapped by prompt/decode.
// - SimpleMLP: the seed's Linear(128, 256) -> relu -> Linear(256, 10).
// - Decoder (decoder.h; TinyLlama is its old name): the Llama-family
//   decoder sharded for tp x pp, tiny-llama by default, Llama-3, Mistral
//   and Qwen2 shapes from a config.json (hf_config.h); real or meta weights.
// - greedy_generate: greedy generation over the ranks of a tp x pp job.
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <npucache/models/decoder.h>
#include <npucache/models/hf_config.h>
#include <npucache/module.h>
#include <npucache/runtime/communicator.h>

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

class NPUCACHE_API SeedExample : public nn::Module {
 public:
  SeedExample();
  std::string type_name() const override { return "Model"; }
  Tensor forward(const InputMeta& x, const std::vector<Tensor>& kv);
  Tensor prompt(const InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv); }
  Tensor decode(const InputMeta& x, const std::vector<Tensor>& kv) { return forward(x, kv); }
  std::shared_ptr<nn::Linear> linear1, linear2;
};

class NPUCACHE_API SimpleMLP : public nn::Module {
 public:
  explicit SimpleMLP(uint64_t seed = 7);
  Tensor forward(const Tensor& x);
  std::shared_ptr<nn::Linear> fc1, fc2;
};

struct GenerationResult {
  std::vector<int64_t> tokens;             // generated tokens (batch row 0)
  std::vector<std::vector<float>> logits;  // last-position logits per step (last stage only)
  double time_to_first_token_s = 0;
  std::vector<double> token_latency_s;  // decode steps
};

// Greedy generation of `new_tokens` tokens after `prompt` (batch 1) on every
// rank of `comm`. The next token is chosen on the last stage and broadcast
// over the pp group. `prompt_fn`/`decode_fn` default to the model's eager
// methods; cached or compiled callables may be passed instead.
// One model call (tokens, positions, kv) -> logits or hidden states.
using StepFn = std::function<Tensor(const Tensor&, const Tensor&, const std::vector<Tensor>&)>;
NPUCACHE_API GenerationResult greedy_generate(Decoder& model, const std::vector<int64_t>& prompt, int new_tokens,
                                              Communicator& comm, StepFn prompt_fn = nullptr,
                                              StepFn decode_fn = nullptr);

}  // namespace npucache::models
