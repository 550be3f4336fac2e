// Decoder configs from Hugging Face config.json files, and the configs the
// project ships (configs/*.json: the published shapes of Llama-3-8B,
// Llama-3-70B, Qwen2.5-7B, Mistral-7B-v0.1).
//
// Supported: "architectures" of exactly one of LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM. Fields read:
//   required  hidden_size, intermediate_size, num_hidden_layers,
//             num_attention_heads, vocab_size, max_position_embeddings,
//             rms_norm_eps (positive numbers; sizes integers)
//   optional  num_key_value_heads (default: num_attention_heads),
//             rope_theta (10000), tie_word_embeddings (false),
//             hidden_act (must be "silu"), head_dim (must equal
//             hidden_size / num_attention_heads), model_type (must match
//             the architecture), rope_scaling (must be null),
//             mlp_bias (must be false)
//   attention bias: Llama's attention_bias (default false) puts a bias on
//             q/k/v and o; Qwen2 always has q/k/v bias and no o bias
//             (attention_bias, if present, must be true); Mistral has none
//             (attention_bias, if present, must be false)
//   windows:  Mistral's sliding_window caps the KV-cache length (max_seq),
//             so full causal attention equals windowed attention for every
//             sequence the model accepts; Qwen2's use_sliding_window must
//             be false (its sliding_window is then unused)
// Other fields (token ids, torch_dtype, initializer_range, use_cache...) do
// not change the computed function and are ignored: the model computes in
// f32 with deterministic weights. Every error is a ConfigError that names
// the file and the offending field, its value and what is supported.
//
// Shipped configs are found by name (the file stem, "llama-3-8b") in the
// directories of config_search_path(), first match wins.
#pragma once

#include <npucache/export.h>

#include <npucache/models/decoder.h>

#include <string>
#include <vector>

namespace npucache::models {

// `text`: the JSON of a config.json; `origin` names it in errors.
NPUCACHE_API DecoderConfig parse_hf_config(const std::string& text, const std::string& origin);
// Reads and parses a config.json; the config's name is the file stem (the
// directory name for a file named config.json).
NPUCACHE_API DecoderConfig load_hf_config(const std::string& path);

// Where shipped configs are looked for, in order: the directories in
// $NPUCACHE_CONFIG_PATH (colon-separated), then the data directory found
// relative to the models library: installed, <prefix>/share/npucache/configs
// (so a relocated install works); when that does not exist (the library in
// its build tree), the build tree's copy, <build>/share/npucache/configs.
// Never the source tree.
NPUCACHE_API std::vector<std::string> config_search_path();
// The names of the shipped configs (sorted, without duplicates).
NPUCACHE_API std::vector<std::string> shipped_config_names();
// The path of the shipped config `name`; ConfigError listing the names and
// the directories searched when there is none.
NPUCACHE_API std::string find_shipped_config(const std::string& name);

// A model named on a command line: "tiny-llama" (DecoderConfig{}),
// "tiny-llama-large" (DecoderConfig::large()), a path to a config.json
// (anything containing '/' or ending in ".json"), or a shipped config name.
NPUCACHE_API DecoderConfig resolve_model(const std::string& model);

}  // namespace npucache::models
