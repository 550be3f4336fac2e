// The config.json loader: each supported family, each refused value (the
// error names the field), and finding shipped configs.
#include <npucache/error.h>
#include <npucache/models/models.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace npucache;
using nlohmann::json;

namespace {

json llama() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 3,
    "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1024,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "rope_scaling": null, "torch_dtype": "bfloat16"})");
}

// The ConfigError message of parsing `j`; fails the test when it parses.
std::string error_of(const json& j) {
  try {
    models::parse_hf_config(j.dump(), "test/config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted " << j.dump();
  return "";
}

void expect_field_error(json j, const std::string& field, const json& value, const std::string& says) {
  if (value.is_discarded())
    j.erase(field);
  else
    j[field] = value;
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("test/config.json: field '" + field + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(says), std::string::npos) << msg;
}

}  // namespace

TEST(HfConfig, ReadsTheLlamaFamily) {
  auto c = models::parse_hf_config(llama().dump(), "x");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden, 256);
  EXPECT_EQ(c.intermediate, 512);
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.vocab, 1024);
  EXPECT_EQ(c.max_seq, 128);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.tie_word_embeddings);

  json j = llama();
  j["attention_bias"] = true;
  j.erase("num_key_value_heads");  // HF's default: as many as attention heads
  j["tie_word_embeddings"] = true;
  c = models::parse_hf_config(j.dump(), "x");
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.tie_word_embeddings);
  EXPECT_EQ(c.kv_heads, 8);

  j = llama();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = false;
  j["sliding_window"] = 32;  // unused while use_sliding_window is false
  c = models::parse_hf_config(j.dump(), "x");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_EQ(c.max_seq, 128);

  j = llama();
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["sliding_window"] = 64;
  c = models::parse_hf_config(j.dump(), "x");
  EXPECT_FALSE(c.qkv_bias || c.o_bias);
  EXPECT_EQ(c.max_seq, 64);  // the KV cache never outgrows the window
}

TEST(HfConfig, EachRefusedValueNamesTheField) {
  const json gone = json::value_t::discarded;
  expect_field_error(llama(), "architectures", json::array({"GPT2LMHeadModel"}),
                     "GPT2LMHeadModel, which is not supported; supported: LlamaForCausalLM, MistralForCausalLM, "
                     "Qwen2ForCausalLM");
  expect_field_error(llama(), "architectures", json::array({"LlamaForCausalLM", "MistralForCausalLM"}),
                     "must list exactly one architecture");
  expect_field_error(llama(), "hidden_act", "gelu", "only silu");
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                            "vocab_size", "max_position_embeddings", "rms_norm_eps", "architectures"})
    expect_field_error(llama(), field, gone, "is missing; it is required");
  expect_field_error(llama(), "hidden_size", "256", "must be a positive integer, not \"256\"");
  expect_field_error(llama(), "num_hidden_layers", 0, "must be a positive integer, not 0");
  expect_field_error(llama(), "rms_norm_eps", -1, "must be a positive number");
  expect_field_error(llama(), "num_key_value_heads", 3, "(3) does not divide num_attention_heads (8)");
  json seven = llama();
  seven["num_attention_heads"] = 7;
  EXPECT_NE(error_of(seven).find("field 'hidden_size' (256) is not divisible by num_attention_heads (7)"),
            std::string::npos);
  expect_field_error(llama(), "rope_scaling", json{{"rope_type", "llama3"}, {"factor", 8.0}},
                     "only unscaled rotary embeddings");
  expect_field_error(llama(), "head_dim", 64, "only hidden_size / num_attention_heads (32)");
  expect_field_error(llama(), "mlp_bias", true, "MLP projections with bias are not supported");
  expect_field_error(llama(), "model_type", "gpt2", "but LlamaForCausalLM is model_type 'llama'");
  expect_field_error(llama(), "tie_word_embeddings", "yes", "must be true or false");
  json mistral = llama();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["model_type"] = "mistral";
  expect_field_error(mistral, "attention_bias", true, "MistralForCausalLM has no attention bias");
  json qwen = llama();
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  qwen["model_type"] = "qwen2";
  expect_field_error(qwen, "use_sliding_window", true, "sliding-window attention is not supported");
  expect_field_error(qwen, "attention_bias", false, "Qwen2ForCausalLM always has q/k/v bias");
}

TEST(HfConfig, MalformedFilesAreClearErrors) {
  EXPECT_THROW(models::parse_hf_config("{not json", "f"), ConfigError);
  EXPECT_THROW(models::parse_hf_config("[1, 2]", "f"), ConfigError);
  try {
    models::load_hf_config("/nonexistent/config.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the model config '/nonexistent/config.json'"), std::string::npos);
  }
}

TEST(HfConfig, ShippedConfigsAreFoundByNameAndPathsByPath) {
  const auto names = models::shipped_config_names();
  for (const char* n : {"llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mistral-7b"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(models::resolve_model("tiny-llama").name, "tiny-llama");
  EXPECT_EQ(models::resolve_model("tiny-llama-large").hidden, 256);
  EXPECT_EQ(models::resolve_model("llama-3-70b").layers, 80);
  try {
    models::resolve_model("llama-9");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model 'llama-9'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("llama-3-8b"), std::string::npos) << e.what();  // lists what there is
  }
  // A path: a Hugging Face snapshot directory's config.json is named after
  // its directory.
  const auto dir = std::filesystem::temp_directory_path() / ("npucache-hf-" + std::to_string(::getpid())) / "my-llama";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << llama().dump();
  const auto c = models::resolve_model((dir / "config.json").string());
  EXPECT_EQ(c.name, "my-llama");
  EXPECT_EQ(c.hidden, 256);
  // NPUCACHE_CONFIG_PATH directories are searched first.
  std::ofstream(dir / "llama-3-8b.json") << llama().dump();
  ::setenv("NPUCACHE_CONFIG_PATH", dir.c_str(), 1);
  EXPECT_EQ(models::resolve_model("llama-3-8b").hidden, 256);
  ::unsetenv("NPUCACHE_CONFIG_PATH");
  EXPECT_EQ(models::resolve_model("llama-3-8b").hidden, 4096);
  std::filesystem::remove_all(dir.parent_path());
}
