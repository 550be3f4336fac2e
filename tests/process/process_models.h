// A small model for the process-context tests (test_process_context.cpp)
// and their worker process (process_worker.cpp), so both make the same
// cache keys: a linear layer and a silu whose decomposition is the user's
// own ("test.hook"), which calls a hook while the compiler decomposes it --
// after the first call's lookup and before its save.
#pragma once

#include <npucache/npucache.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace npucache::testing_support {

class Hooked : public nn::Module {
 public:
  // `k` is a plain member read by the method: a constant of its graph, so
  // models of different k have different graph keys.
  explicit Hooked(double scale = 1.0) : k(scale) {
    lin = register_module("lin", std::make_shared<nn::Linear>(4, 4));
    lin->weight.copy_from({0.5f, -0.25f, 0, 1, 0.75f, 0.5f, -1, 0, 0, 0.25f, 0.5f, -0.5f, 1, 0, 0.25f, 0.75f});
    lin->bias.copy_from({0.1f, -0.1f, 0.2f, 0});
  }
  std::string type_name() const override { return "Hooked"; }
  Tensor f(const Tensor& x) { return ops::silu(lin->forward(x)) * k; }
  Tensor g(const Tensor& x) { return ops::silu(lin->forward(x)) + k; }
  std::shared_ptr<nn::Linear> lin;
  double k;
};

inline Tensor hooked_input(float base = 0) {
  std::vector<float> v(8);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = base + 0.25f * static_cast<float>(i);
  return Tensor::from_vector(v, {2, 4});
}

// Called by the decomposition of silu while a compile runs (any thread).
// Never destroyed: compiles may run while another thread runs exit().
inline std::function<void()>& compile_hook() {
  static auto& hook = *new std::function<void()>();
  return hook;
}

inline CacheOptions hooked_options(const std::string& dir, const std::string& method) {
  CacheOptions o;
  o.cache_dir = dir;
  o.remote.url = "off";
  o.compile.method_name = method;
  CompilerConfig c;
  c.autotune_candidates = 2;
  c.autotune_min_time_us = 0;
  o.compile.config = c;
  o.compile.custom_decompositions[Op::silu] = {"test.hook", [](const std::vector<Tensor>& in, const Attrs&) {
                                                 if (compile_hook()) compile_hook()();
                                                 return in[0] * ops::sigmoid(in[0]);
                                               }};
  return o;
}

}  // namespace npucache::testing_support
