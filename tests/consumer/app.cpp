// A program using an installed npucache (built by tests/consumer/run.cmake
// with CMake and with pkg-config, at the compiler's default standard): its
// own model, written against the public headers, cached with cache_compile
// into CACHE_DIR; and the reference seed model of npucache::models, eager.
//
//   app CACHE_DIR [--expect compiled|hit] [--prefix P]
//
// Prints "entry <the seed's entry path>" and "outcome <outcome>"; exits 1
// when a cached result differs from the eager one or the outcome is not the
// expected one. With --prefix, also checks that the shipped model configs
// are found in the installed data directory under P.
#include <npucache/models/models.h>
#include <npucache/npucache.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

static_assert(__cplusplus >= 202002L, "the npucache targets give C++20; the pkg-config build passes -std=c++20");

using namespace npucache;

namespace consumer {  // names the model in the cache: consumer.TinyNet_dynamic_...

struct Request {
  Tensor tokens;
  bool is_prompt = true;
  template <class V>
  void visit(V& v) {
    v("tokens", tokens);
    v("is_prompt", is_prompt);
  }
};

class TinyNet : public nn::Module {
 public:
  TinyNet() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 4));
    float k = 0.0f;
    for (auto& [name, p] : named_parameters()) {
      std::size_t n = 1;
      for (int64_t d : p.dims()) n *= static_cast<std::size_t>(d);
      std::vector<float> v(n);
      for (float& x : v) x = 0.05f * std::sin(k += 0.7f);
      p.copy_from(v);
    }
  }
  Tensor prompt(const Request& r, const std::vector<Tensor>& kv) {
    return fc2->forward(ops::relu(fc1->forward(r.tokens))) + kv.at(0);
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

}  // namespace consumer

using consumer::Request;
using consumer::TinyNet;

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: app CACHE_DIR [--expect compiled|hit] [--prefix P]\n");
    return 2;
  }
  std::string expect, prefix;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--expect") == 0) expect = argv[i + 1];
    if (std::strcmp(argv[i], "--prefix") == 0) prefix = argv[i + 1];
  }
  if (!prefix.empty()) {
    const std::string config = models::find_shipped_config("llama-3-70b");
    const models::DecoderConfig c = models::load_hf_config(config);
    std::printf("%s: %lld layers, hidden %lld\n", config.c_str(), static_cast<long long>(c.layers),
                static_cast<long long>(c.hidden));
    if (config.rfind(std::filesystem::canonical(prefix).string(), 0) != 0 || c.layers != 80) {
      std::fprintf(stderr, "app: the shipped config found is not the one installed under %s\n", prefix.c_str());
      return 1;
    }
  }

  // npucache::models, eagerly: linear2(x) + linear2(kv[0]) with all-ones
  // parameters is (1+2+1) + (1+1+1) = 7 and (3+4+1) + 3 = 11.
  models::SeedExample seed;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), true};
  const std::vector<float> seed_out = seed.prompt(x, {Tensor::from_vector({1, 1, 1, 1}, {2, 2})}).to_vector();
  const bool seed_ok = seed_out == std::vector<float>{7.0f, 11.0f};

  TinyNet net;
  CacheOptions o;
  o.cache_dir = argv[1];
  auto prompt = cache_compile(net, &TinyNet::prompt, o);
  const Request r{Tensor::from_vector({0.5f, -1, 2, 0.25f, 1, 1, -2, 3, 0, 0.5f, 0.5f, -1}, {3, 4}), true};
  const std::vector<Tensor> kv{Tensor::from_vector(std::vector<float>(12, 0.125f), {3, 4})};
  const std::vector<float> cached = prompt(r, kv).to_vector(), eager = net.prompt(r, kv).to_vector();
  bool equal = cached.size() == eager.size();
  for (std::size_t i = 0; equal && i < cached.size(); ++i)
    equal = std::fabs(cached[i] - eager[i]) <= 1e-5f * (1.0f + std::fabs(eager[i]));

  const std::string outcome(outcome_name(prompt.status().outcome));
  std::printf("npucache %s, C++ %ld\nentry %s\noutcome %s\nseed model %s, cached result %s\n", version(),
              static_cast<long>(__cplusplus), prompt.status().entry.c_str(), outcome.c_str(),
              seed_ok ? "right" : "WRONG", equal ? "equals the eager one" : "DIFFERS from the eager one");
  if (!expect.empty() && outcome != expect) {
    std::fprintf(stderr, "app: expected outcome %s, got %s (%s)\n", expect.c_str(), outcome.c_str(),
                 prompt.status().reason.c_str());
    return 1;
  }
  return seed_ok && equal ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "app: %s\n", e.what());
  return 1;
}
