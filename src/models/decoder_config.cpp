// DecoderConfig: sizes, their validation against a layout, and the
// pipeline split of the layers.
#include <npucache/error.h>
#include <npucache/models/decoder.h>

#include <algorithm>
#include <tuple>

namespace npucache::models {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

DecoderConfig DecoderConfig::large() {
  DecoderConfig c;
  c.name = "tiny-llama-large";
  c.vocab = 1024;
  c.hidden = 256;
  c.layers = 8;
  c.heads = 8;
  c.kv_heads = 4;
  c.intermediate = 512;
  c.max_seq = 128;
  return c;
}

void DecoderConfig::validate(int tp, int pp) const {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) throw ConfigError(name + ": " + what);
  };
  need(tp >= 1 && pp >= 1, "tp and pp must be >= 1 (tp = " + std::to_string(tp) + ", pp = " + std::to_string(pp) + ")");
  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", vocab},
                                                   {"hidden_size", hidden},
                                                   {"num_hidden_layers", layers},
                                                   {"num_attention_heads", heads},
                                                   {"num_key_value_heads", kv_heads},
                                                   {"intermediate_size", intermediate},
                                                   {"max_seq (the KV-cache length)", max_seq}};
  for (const auto& [field, v] : sizes) need(v >= 1, std::string(field) + " must be >= 1, not " + num(v));
  const std::tuple<const char*, int64_t, int64_t> limits[] = {{"vocab_size", vocab, kMaxVocab},
                                                              {"hidden_size", hidden, kMaxHidden},
                                                              {"num_hidden_layers", layers, kMaxLayers},
                                                              {"num_attention_heads", heads, kMaxHeads},
                                                              {"num_key_value_heads", kv_heads, kMaxHeads},
                                                              {"intermediate_size", intermediate, kMaxIntermediate},
                                                              {"max_seq (the KV-cache length)", max_seq, kMaxSeq}};
  for (const auto& [field, v, most] : limits)
    need(v <= most, std::string(field) + " is " + num(v) + ", more than " + num(most) +
                        " (far above any published model): the config is wrong");
  need(hidden % heads == 0,
       "hidden_size (" + num(hidden) + ") is not divisible by num_attention_heads (" + num(heads) + ")");
  need(head_dim() % 2 == 0,
       "the head dim hidden_size / num_attention_heads (" + num(head_dim()) + ") must be even for rotary embeddings");
  need(heads % kv_heads == 0,
       "num_key_value_heads (" + num(kv_heads) + ") does not divide num_attention_heads (" + num(heads) + ")");
  need(heads % tp == 0 && kv_heads % tp == 0, "num_attention_heads (" + num(heads) + ") and num_key_value_heads (" +
                                                  num(kv_heads) + ") must be divisible by tp = " + std::to_string(tp) +
                                                  " (each rank holds whole heads)");
  need(intermediate % tp == 0,
       "intermediate_size (" + num(intermediate) + ") is not divisible by tp = " + std::to_string(tp));
  need(vocab % tp == 0, "vocab_size (" + num(vocab) + ") is not divisible by tp = " + std::to_string(tp));
  need(layers >= pp, "num_hidden_layers (" + num(layers) + ") is smaller than pp = " + std::to_string(pp) +
                         ": every pipeline stage needs at least one layer");
  need(eps > 0, "rms_norm_eps must be > 0");
  need(rope_theta > 0, "rope_theta must be > 0");
}

LayerRange stage_layers(int64_t layers, int pp, int stage) {
  if (pp < 1 || stage < 0 || stage >= pp)
    throw ConfigError("pipeline stage " + std::to_string(stage) + " is outside pp = " + std::to_string(pp));
  if (layers < pp)
    throw ConfigError(num(layers) + " layers cannot fill pp = " + std::to_string(pp) +
                      " stages: every pipeline stage needs at least one layer");
  const int64_t base = layers / pp, extra = layers % pp;
  const int64_t s = stage;
  return LayerRange{s * base + std::min(s, extra), base + (s < extra ? 1 : 0)};
}

StageRanks stage_ranks(const Communicator& comm) {
  const ParallelLayout& l = comm.layout();
  return StageRanks{l.tp, l.pp, comm.rank(GroupRole::tp), comm.rank(GroupRole::pp)};
}

}  // namespace npucache::models
