// TorchAir's cache_compile example, in C++.
//
// InputMeta mimics vLLM's input structure: a tensor and an is_prompt flag,
// exposed to tracing by a visit member. The model keeps its cached callables
// as members, made in its constructor once its layers exist, and forward
// dispatches to them on is_prompt: prompt and decode are thin wrappers over
// _forward, so each is traced once and cached under its own ${func}.
//
//   NPUCACHE_LOG_LEVEL=info torchair_model [CACHE_DIR]
//
// First run: TorchAir's "Cache ModelCacheMeta(name='Model.prompt(x, y)', ...)
// saved to <cache_dir>/<model_info>/prompt/compiled_module" lines; a second
// run loads both methods ("... loaded from ..."). Each run prints what
// happened to each method, compares the cached results with the eager ones
// and exits 1 when they differ.
#include <npucache/npucache.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace npucache;

// A struct argument: the tensor becomes a graph input, is_prompt a guard
// (the trace is specialised to its value).
struct InputMeta {
  Tensor data;
  bool is_prompt = true;
  template <class V>
  void visit(V& v) {
    v("data", data);
    v("is_prompt", is_prompt);
  }
};

class Model : public nn::Module {
 public:
  using Cached = CompiledMethod<Model, Tensor, const InputMeta&, const std::vector<Tensor>&>;

  explicit Model(const std::string& cache_dir) {
    linear1 = register_module("linear1", std::make_shared<nn::Linear>(2, 1));
    linear2 = register_module("linear2", std::make_shared<nn::Linear>(2, 1));
    for (auto& [name, p] : named_parameters()) {  // torch.nn.init.ones_
      std::size_t n = 1;
      for (int64_t d : p.dims()) n *= static_cast<std::size_t>(d);
      p.copy_from(std::vector<float>(n, 1.0f));
    }
    // config.ge_config.enable_single_stream = True, as in TorchAir's example.
    CompilerConfig config;
    config.ge_config.enable_single_stream = true;
    CacheOptions options;
    options.compile.config = config;
    options.compile.arg_names = {"x", "y"};  // TorchAir's names: Model.prompt(x, y)
    options.cache_dir = cache_dir;           // empty: $NPUCACHE_CACHE_DIR or .npucache
    cached_prompt = cache_compile(*this, &Model::prompt, options);
    cached_decode = cache_compile(*this, &Model::decode, options);
  }

  Tensor forward(const InputMeta& x, const std::vector<Tensor>& kv) {
    if (x.is_prompt) return cached_prompt(x, kv);
    return cached_decode(x, kv);
  }

  // The computation, run eagerly by eager_forward and traced through the
  // wrappers.
  Tensor _forward(const InputMeta& x, const std::vector<Tensor>& kv) {
    return linear2->forward(x.data) + linear2->forward(kv.at(0));
  }
  Tensor prompt(const InputMeta& x, const std::vector<Tensor>& y) { return _forward(x, y); }
  Tensor decode(const InputMeta& x, const std::vector<Tensor>& y) { return _forward(x, y); }

  std::shared_ptr<nn::Linear> linear1, linear2;
  Cached cached_prompt, cached_decode;
};

namespace {

bool close(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-5f * (1.0f + std::fabs(b[i]))) return false;
  return true;
}

std::string values(const std::vector<float>& v) {
  std::string s;
  for (float f : v) s += (s.empty() ? "" : " ") + std::to_string(f);
  return s;
}

// Prints what the latest call of `m` did; returns whether `cached` equals
// `eager`.
bool report(const char* label, const Model::Cached& m, const Tensor& cached, const Tensor& eager) {
  const std::vector<float> c = cached.to_vector(), e = eager.to_vector();
  const CallStatus& s = m.status();
  std::printf("%s: %s (compiles %zu)%s%s\n  entry %s\n  cached [%s], eager [%s]: %s\n", label,
              std::string(outcome_name(s.outcome)).c_str(), m.compiles(), s.reason.empty() ? "" : ", ",
              s.reason.c_str(), s.entry.c_str(), values(c).c_str(), values(e).c_str(),
              close(c, e) ? "equal" : "DIFFERENT");
  return close(c, e);
}

}  // namespace

int main(int argc, char** argv) try {
  Model model(argc > 1 ? argv[1] : "");
  InputMeta x{Tensor::from_vector({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2}), true};
  std::vector<Tensor> kv{Tensor::from_vector({1.0f, 2.0f, -0.5f, 3.0f}, {2, 2})};

  bool ok = report("prompt", model.cached_prompt, model.forward(x, kv), model._forward(x, kv));
  x.is_prompt = false;
  ok = report("decode", model.cached_decode, model.forward(x, kv), model._forward(x, kv)) && ok;
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "torchair_model: %s\n", e.what());
  return 1;
}
