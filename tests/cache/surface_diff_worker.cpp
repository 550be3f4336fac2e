// One process of the random differential test of the compile surface: a
// small model drawn from SEED -- layers of matmuls and elementwise ops with
// graph breaks (host reads, truth values) between some of them, residuals
// reaching back across breaks, and a SymInt bounding a slice -- cached with
// the options SEED also draws (mode or backend, dynamic unset/true/false,
// fullgraph=false), called with random batches and SymInt values, some
// calls taking the previous call's result as their input (as a decode loop
// does), each result compared with eager.
//
//   surface_diff_worker DIR SEED CALLS
//
// Prints "options <...>", one line per call ("call <batch> <n> <outcome>
// breaks <k>"), then "maxdiff <max |cached - eager|>". Exit status 0 unless
// a call threw.
#include <npucache/cache.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace npucache;

namespace {

enum class Layer { matmul, tanh, sigmoid, relu_shift, scale, residual };
enum class Break { none, host_read, truth_value };

struct Fuzz : nn::Module {
  int64_t width;
  std::vector<Layer> layers;
  std::vector<Break> breaks;  // after each layer
  std::vector<Tensor> weights;

  Fuzz(std::mt19937& rng, int64_t w) : width(w) {
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      layers.push_back(static_cast<Layer>(rng() % 6));
      breaks.push_back(static_cast<Break>(rng() % 3));
      std::vector<float> v(static_cast<std::size_t>(w * w));
      for (std::size_t k = 0; k < v.size(); ++k)
        v[k] = static_cast<float>(static_cast<int>((k * 7 + static_cast<std::size_t>(i) * 3) % 11) - 5) /
               (10.0f * static_cast<float>(w));
      weights.push_back(register_parameter("w" + std::to_string(i), Tensor::from_vector(v, {w, w})));
    }
  }
  std::string type_name() const override { return "Fuzz"; }

  // x [B, width]; n <= B rows are kept at the end.
  Tensor run(const Tensor& x, SymInt n) {
    Tensor h = x, first;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      switch (layers[i]) {
        case Layer::matmul: h = ops::matmul(h, weights[i]); break;
        case Layer::tanh: h = ops::tanh(h); break;
        case Layer::sigmoid: h = ops::sigmoid(h) - 0.5f; break;
        case Layer::relu_shift: h = ops::relu(h + 0.1f) - 0.05f; break;
        case Layer::scale: h = h * 1.5f + x; break;
        case Layer::residual: h = first.defined() ? h + first * 0.5f : h * 0.5f; break;  // across breaks
      }
      if (i == 0) first = h;
      switch (breaks[i]) {
        case Break::none: break;
        case Break::host_read: h = ops::sum(h, {0, 1}).item() > 0 ? h * 0.75f : -h; break;
        case Break::truth_value:
          if (ops::gt(ops::mean(h, {0, 1}), ops::scalar(0.0)))
            h = ops::tanh(h);
          else
            h = h + 0.25f;
          break;
      }
    }
    return ops::slice(h + x * 0.125f, 0, 0, n) * 2.0f;  // the argument read again by the last piece
  }
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::fprintf(stderr, "usage: surface_diff_worker DIR SEED CALLS\n");
    return 2;
  }
  const unsigned seed = static_cast<unsigned>(std::stoul(argv[2]));
  const int calls = std::stoi(argv[3]);
  std::mt19937 rng(seed);
  const int64_t width = rng() % 2 ? 8 : 16;
  Fuzz m(rng, width);

  CacheOptions o;
  o.cache_dir = argv[1];
  o.compile.fullgraph = false;
  const char* modes[] = {"default", "reduce-overhead", "npugraphs", "max-autotune-no-cudagraphs"};
  const std::string mode = modes[rng() % 4];
  if (mode == "npugraphs")
    o.compile.backend = "npugraphs";
  else
    o.compile.mode = mode;
  const int dyn = static_cast<int>(rng() % 3);
  o.compile.dynamic = dyn == 0 ? std::nullopt : std::optional<bool>(dyn == 1);
  const char* dynamic_names[] = {"auto", "true", "false"};
  std::printf("options width %lld layers %zu mode %s dynamic %s\n", static_cast<long long>(width), m.layers.size(),
              mode.c_str(), dynamic_names[dyn]);

  auto fn = cache_compile(m, &Fuzz::run, o);
  // The calls come from a stream of their own, so processes of one seed
  // with different call counts agree on their first calls.
  std::mt19937 calls_rng(seed * 7919u + 1u);
  double maxdiff = 0;
  Tensor last;  // the previous call's result (in the pool of captured graphs in reduce-overhead)
  for (int c = 0; c < calls; ++c) {
    const bool feed_back = last.defined() && calls_rng() % 3 == 0;
    const int64_t batch = feed_back ? last.dims()[0] : 1 + static_cast<int64_t>(calls_rng() % 5);
    const int64_t n = 1 + static_cast<int64_t>(calls_rng() % static_cast<unsigned>(batch));
    std::vector<float> v(static_cast<std::size_t>(batch * width));
    const float sign = calls_rng() % 2 ? 1.0f : -1.0f;
    for (std::size_t k = 0; k < v.size(); ++k)
      v[k] = sign * (static_cast<float>((k * 5 + static_cast<std::size_t>(c)) % 9) / 8.0f - 0.3f);
    Tensor x = feed_back ? last : Tensor::from_vector(v, {batch, width});
    // Eager first: the cached call may reuse the memory of the previous
    // result it takes (the contract of results in the pool).
    const std::vector<float> want = m.run(x, n).to_vector();
    last = fn(x, n);
    const std::vector<float> got = last.to_vector();
    if (got.size() != want.size()) {
      std::printf("size mismatch at call %d: %zu, eager %zu\n", c, got.size(), want.size());
      return 1;
    }
    for (std::size_t k = 0; k < got.size(); ++k)
      maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(got[k] - want[k])));
    std::printf("call %lld %lld %s breaks %zu%s\n", static_cast<long long>(batch), static_cast<long long>(n),
                std::string(outcome_name(fn.status().outcome)).c_str(), fn.status().graph_breaks.size(),
                feed_back ? " fed back" : "");
  }
  std::printf("maxdiff %.9g\n", maxdiff);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "surface_diff_worker: %s\n", e.what());
  return 1;
}
