// The config.json loader: each supported family, each refused value (the
// error names the field), and finding shipped configs.
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/module.h>
#include <npucache/tensor.h>

#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <chrono>

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
  expect_field_error(llama(), "rms_norm_eps", -1, "must be a positive, finite number");
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

// Hostile values: a number no double holds, absurd sizes, a layer count of
// ten million: each a ConfigError naming the file and the field, at once
// (before anything is built).
TEST(HfConfig, HostileValuesAreRefusedBeforeAnythingIsBuilt) {
  auto text_error = [](const std::string& text) {
    try {
      models::parse_hf_config(text, "test/config.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted " << text;
    return std::string();
  };
  for (const char* field : {"hidden_size", "rms_norm_eps", "vocab_size"}) {
    std::string text = llama().dump();
    const std::string key = std::string("\"") + field + "\":";
    const std::size_t at = text.find(key) + key.size();
    text.replace(at, text.find_first_of(",}", at) - at, "1e999");
    const std::string msg = text_error(text);
    EXPECT_NE(msg.find("test/config.json: field '" + std::string(field) + "' (1e999) is out of range"),
              std::string::npos)
        << msg;
  }
  const auto t0 = std::chrono::steady_clock::now();
  expect_field_error(llama(), "hidden_size", int64_t{1} << 40, "is 1099511627776, more than 131072");
  expect_field_error(llama(), "num_hidden_layers", 10000000, "is 10000000, more than 4096");
  expect_field_error(llama(), "vocab_size", int64_t{1} << 40, "is 1099511627776, more than");
  expect_field_error(llama(), "intermediate_size", int64_t{1} << 40, "more than");
  expect_field_error(llama(), "max_position_embeddings", int64_t{1} << 40, "more than");
  expect_field_error(llama(), "num_key_value_heads", 1 << 20, "more than 4096");
  expect_field_error(llama(), "hidden_size", -4096, "must be a positive integer");
  expect_field_error(llama(), "hidden_size", 4096.5, "must be a positive integer");
  expect_field_error(llama(), "rope_theta", -1.0, "must be a positive, finite number");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  // The C++ API: a model built from such a config is refused the same way.
  models::DecoderConfig c;
  c.layers = 10000000;
  try {
    models::Decoder(c, models::StageRanks{1, 1, 0, 0}, models::Weights::meta);
    ADD_FAILURE() << "a decoder of ten million layers was built";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_hidden_layers is 10000000, more than 4096"), std::string::npos)
        << e.what();
  }
}

// Files that are not config files: refused at once, never read without end
// or waited on.
TEST(HfConfig, DevicesPipesAndDirectoriesAreRefusedAtOnce) {
  const testing_support::TempDir tmp("hf", testing_support::current_test_name());
  const std::filesystem::path& dir = tmp.path();
  const std::string pipe = (dir / "pipe.json").string();
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  std::ofstream((dir / "big.json").string()) << std::string(2 << 20, ' ');
  const std::pair<std::string, std::string> cases[] = {{"/dev/zero", "is a device"},
                                                       {"/dev/urandom", "is a device"},
                                                       {pipe, "is a named pipe"},
                                                       {dir.string(), "is a directory"},
                                                       {(dir / "big.json").string(), "more than a config.json can be"}};
  for (const auto& [path, says] : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      models::load_hf_config(path);
      ADD_FAILURE() << "accepted " << path;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0) << path;
  }
}

// Dims given through the C++ API are bounded before anything is
// allocated or traced: a ShapeError, never a crash in a later pass.
TEST(HfConfig, HugeTensorDimsAreRefusedAtCreation) {
  EXPECT_THROW(Tensor::meta({int64_t{1} << 41}), ShapeError);
  EXPECT_THROW(Tensor::meta({int64_t{1} << 21, int64_t{1} << 21}), ShapeError);
  EXPECT_THROW(Tensor::meta({int64_t{1} << 62, int64_t{1} << 62}), ShapeError);  // the product overflows
  {
    nn::MetaScope meta;
    EXPECT_THROW(nn::Linear(int64_t{1} << 21, int64_t{1} << 21), ShapeError);
  }
  EXPECT_NO_THROW(Tensor::meta({int64_t{1} << 20, int64_t{1} << 20}));
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
  const testing_support::TempDir tmp("hf", testing_support::current_test_name());
  const auto dir = tmp.path() / "my-llama";
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
  // Without it: one directory, the data directory found from the library
  // (in the build tree, the build's copy of configs/), never the source tree.
  const std::vector<std::string> search = models::config_search_path();
  ASSERT_EQ(search.size(), 1u);
  EXPECT_TRUE(search[0].ends_with("/share/npucache/configs")) << search[0];
}
