// Uses the installed library: traces and runs the seed model eagerly, and
// finds a shipped model config in the installed data directory (argv[1]:
// the install prefix).
#include <npucache/ir/hash.h>
#include <npucache/models/models.h>
#include <npucache/npucache.h>

#include <cstdio>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  using namespace npucache;
  if (argc > 1) {
    const std::string config = models::find_shipped_config("llama-3-70b");
    const models::DecoderConfig c = models::load_hf_config(config);
    std::printf("%s: %lld layers, hidden %lld\n", config.c_str(), static_cast<long long>(c.layers),
                static_cast<long long>(c.hidden));
    const std::string prefix = std::filesystem::canonical(argv[1]).string();
    if (config.rfind(prefix, 0) != 0 || c.layers != 80) {
      std::printf("the installed config is not under the prefix %s\n", argv[1]);
      return 1;
    }
  }
  models::SeedExample model;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), true};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  std::vector<float> out = model.prompt(x, kv).to_vector();
  TraceOptions opts;
  opts.method_name = "prompt";
  TraceResult t = trace_method(model, &models::SeedExample::prompt, opts, x, kv);
  // linear2(x) + linear2(kv[0]) with all-ones parameters: (1+2+1) + (1+1+1) = 7, (3+4+1) + 3 = 11
  std::printf("npucache %s: %s -> %.1f %.1f, graph %s\n", version(), t.name.c_str(), out[0], out[1],
              canonical_hash(t.graph).hex().c_str());
  return out.size() == 2 && out[0] == 7.0f && out[1] == 11.0f ? 0 : 1;
}
