// Parsing a Hugging Face config.json into a DecoderConfig (hf_config.h).
#include <npucache/error.h>
#include <npucache/models/hf_config.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace npucache::models {
namespace {

using nlohmann::json;

struct Family {
  const char* architecture;
  const char* model_type;
};
constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", "llama"},
    {"MistralForCausalLM", "mistral"},
    {"Qwen2ForCausalLM", "qwen2"},
};

std::string supported_architectures() {
  std::string s;
  for (const auto& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.architecture);
  return s;
}

// Reads the fields of one config.json; every error names the origin and
// the field.
class Fields {
 public:
  Fields(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ConfigError(origin_ + ": field '" + field + "' " + what);
  }
  bool has(const std::string& field) const { return j_.contains(field) && !j_.at(field).is_null(); }
  const json& at(const std::string& field) const {
    if (!has(field)) fail(field, "is missing; it is required");
    return j_.at(field);
  }
  std::string value(const std::string& field) const { return j_.at(field).dump(); }

  int64_t positive_int(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_number_integer() || v.get<int64_t>() < 1) fail(field, "must be a positive integer, not " + v.dump());
    return v.get<int64_t>();
  }
  int64_t positive_int_or(const std::string& field, int64_t fallback) const {
    return has(field) ? positive_int(field) : fallback;
  }
  double positive_number(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_number() || !(v.get<double>() > 0)) fail(field, "must be a positive number, not " + v.dump());
    return v.get<double>();
  }
  double positive_number_or(const std::string& field, double fallback) const {
    return has(field) ? positive_number(field) : fallback;
  }
  bool boolean_or(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    const json& v = j_.at(field);
    if (!v.is_boolean()) fail(field, "must be true or false, not " + v.dump());
    return v.get<bool>();
  }
  std::string string_or(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    const json& v = j_.at(field);
    if (!v.is_string()) fail(field, "must be a string, not " + v.dump());
    return v.get<std::string>();
  }

 private:
  const json& j_;
  std::string origin_;
};

const Family& architecture(const Fields& f) {
  const json& a = f.at("architectures");
  if (!a.is_array() || a.size() != 1 || !a[0].is_string())
    f.fail("architectures",
           "must list exactly one architecture, not " + a.dump() + "; supported: " + supported_architectures());
  const std::string name = a[0].get<std::string>();
  for (const auto& fam : kFamilies)
    if (name == fam.architecture) return fam;
  f.fail("architectures", "names " + name + ", which is not supported; supported: " + supported_architectures() +
                              " (the Llama-family decoder)");
}

}  // namespace

DecoderConfig parse_hf_config(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(origin + ": a config.json must hold a JSON object");
  const Fields f(j, origin);
  const Family& fam = architecture(f);
  const std::string arch = fam.architecture;
  DecoderConfig c;
  c.name = origin;
  c.architecture = arch;
  c.hidden = f.positive_int("hidden_size");
  c.intermediate = f.positive_int("intermediate_size");
  c.layers = f.positive_int("num_hidden_layers");
  c.heads = f.positive_int("num_attention_heads");
  c.kv_heads = f.positive_int_or("num_key_value_heads", c.heads);
  c.vocab = f.positive_int("vocab_size");
  c.max_seq = f.positive_int("max_position_embeddings");
  c.eps = f.positive_number("rms_norm_eps");
  c.rope_theta = f.positive_number_or("rope_theta", 10000.0);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);

  const std::string model_type = f.string_or("model_type", fam.model_type);
  if (model_type != fam.model_type)
    f.fail("model_type", "is '" + model_type + "', but " + arch + " is model_type '" + fam.model_type + "'");
  const std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu") f.fail("hidden_act", "is '" + act + "'; only silu (the SwiGLU MLP) is supported");
  if (f.has("rope_scaling"))
    f.fail("rope_scaling", "is " + f.value("rope_scaling") + "; only unscaled rotary embeddings are supported (null)");
  if (f.boolean_or("mlp_bias", false)) f.fail("mlp_bias", "is true; MLP projections with bias are not supported");
  if (c.hidden % c.heads != 0)
    f.fail("hidden_size", "(" + std::to_string(c.hidden) + ") is not divisible by num_attention_heads (" +
                              std::to_string(c.heads) + ")");
  if (f.has("head_dim") && f.positive_int("head_dim") != c.hidden / c.heads)
    f.fail("head_dim", "is " + f.value("head_dim") + "; only hidden_size / num_attention_heads (" +
                           std::to_string(c.hidden / c.heads) + ") is supported");
  if (c.heads % c.kv_heads != 0)
    f.fail("num_key_value_heads", "(" + std::to_string(c.kv_heads) + ") does not divide num_attention_heads (" +
                                      std::to_string(c.heads) + ")");

  if (arch == "LlamaForCausalLM") {
    c.qkv_bias = c.o_bias = f.boolean_or("attention_bias", false);
  } else if (arch == "MistralForCausalLM") {
    if (f.boolean_or("attention_bias", false))
      f.fail("attention_bias", "is true, but MistralForCausalLM has no attention bias");
    if (f.has("sliding_window")) c.max_seq = std::min(c.max_seq, f.positive_int("sliding_window"));
  } else {  // Qwen2ForCausalLM
    if (!f.boolean_or("attention_bias", true))
      f.fail("attention_bias", "is false, but Qwen2ForCausalLM always has q/k/v bias");
    c.qkv_bias = true;
    if (f.boolean_or("use_sliding_window", false))
      f.fail("use_sliding_window", "is true; sliding-window attention is not supported for Qwen2");
  }
  c.validate(1, 1);  // consistent on its own; layouts are checked when a model is built
  return c;
}

DecoderConfig load_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read the model config '" + path + "': no such readable file");
  std::stringstream text;
  text << in.rdbuf();
  DecoderConfig c = parse_hf_config(text.str(), path);
  const std::filesystem::path p(path);
  c.name =
      p.filename() == "config.json" && p.has_parent_path() ? p.parent_path().filename().string() : p.stem().string();
  return c;
}

DecoderConfig resolve_model(const std::string& model) {
  if (model == "tiny-llama") return DecoderConfig{};
  if (model == "tiny-llama-large") return DecoderConfig::large();
  const bool is_path =
      model.find('/') != std::string::npos || (model.size() > 5 && model.compare(model.size() - 5, 5, ".json") == 0);
  return load_hf_config(is_path ? model : find_shipped_config(model));
}

}  // namespace npucache::models
