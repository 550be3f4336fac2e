// Parsing a Hugging Face config.json into a DecoderConfig (hf_config.h).
#include <npucache/error.h>
#include <npucache/models/hf_config.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

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

  // A positive integer of at most `most` (a bound far above any published
  // model, so nothing huge is ever allocated from a wrong config).
  int64_t positive_int(const std::string& field, int64_t most = DecoderConfig::kMaxSeq) const {
    const json& v = at(field);
    if (!v.is_number_integer() || v.get<int64_t>() < 1) fail(field, "must be a positive integer, not " + v.dump());
    const int64_t n = v.get<int64_t>();
    if (n > most)
      fail(field, "is " + v.dump() + ", more than " + std::to_string(most) +
                      " (far above any published model); fix the value");
    return n;
  }
  int64_t positive_int_or(const std::string& field, int64_t fallback, int64_t most) const {
    return has(field) ? positive_int(field, most) : fallback;
  }
  double positive_number(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail(field, "must be a positive, finite number, not " + v.dump());
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

// The field whose value starts at the first occurrence of `token` in the
// text ("hidden_size" for `"hidden_size": 1e999`), or "".
std::string field_of(const std::string& text, const std::string& token) {
  const std::size_t at = token.empty() ? std::string::npos : text.find(token);
  if (at == std::string::npos) return "";
  std::size_t colon = text.rfind(':', at);
  if (colon == std::string::npos) return "";
  const std::size_t close = text.rfind('"', colon);
  if (close == std::string::npos || close == 0) return "";
  const std::size_t open = text.rfind('"', close - 1);
  return open == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

}  // namespace

DecoderConfig parse_hf_config(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::out_of_range& e) {  // a number no double holds (1e999)
    const std::string what = e.what();
    const std::size_t q0 = what.find('\''), q1 = q0 == std::string::npos ? q0 : what.find('\'', q0 + 1);
    const std::string token = q1 == std::string::npos ? "" : what.substr(q0 + 1, q1 - q0 - 1);
    const std::string field = field_of(text, token);
    throw ConfigError(origin + ": " + (field.empty() ? std::string("a number") : "field '" + field + "'") + " (" +
                      token + ") is out of range for a number; fix the value");
  } catch (const json::exception& e) {
    throw ConfigError(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(origin + ": a config.json must hold a JSON object");
  const Fields f(j, origin);
  const Family& fam = architecture(f);
  const std::string arch = fam.architecture;
  DecoderConfig c;
  c.name = origin;
  c.architecture = arch;
  c.hidden = f.positive_int("hidden_size", DecoderConfig::kMaxHidden);
  c.intermediate = f.positive_int("intermediate_size", DecoderConfig::kMaxIntermediate);
  c.layers = f.positive_int("num_hidden_layers", DecoderConfig::kMaxLayers);
  c.heads = f.positive_int("num_attention_heads", DecoderConfig::kMaxHeads);
  c.kv_heads = f.positive_int_or("num_key_value_heads", c.heads, DecoderConfig::kMaxHeads);
  c.vocab = f.positive_int("vocab_size", DecoderConfig::kMaxVocab);
  c.max_seq = f.positive_int("max_position_embeddings", DecoderConfig::kMaxSeq);
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
  // A config.json is a small regular file: a device (/dev/zero), a named
  // pipe or a directory is refused at once, never read without end or
  // waited on; so is a file larger than any config.
  constexpr off_t kMaxConfigBytes = 1 << 20;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    throw ConfigError("cannot read the model config '" + path + "': " + std::strerror(errno) +
                      "; give a config.json file, a shipped config name or tiny-llama");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) throw ConfigError("cannot inspect the model config '" + path + "'");
  if (!S_ISREG(st.st_mode))
    throw ConfigError("the model config '" + path + "' is " +
                      (S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISFIFO(st.st_mode)                       ? "a named pipe"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a regular file") +
                      "; give the path of a config.json file");
  if (st.st_size > kMaxConfigBytes)
    throw ConfigError("the model config '" + path + "' is " + std::to_string(st.st_size) +
                      " bytes, more than a config.json can be (" + std::to_string(kMaxConfigBytes) +
                      "); is it the right file?");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  DecoderConfig c = parse_hf_config(text, path);
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
