// Models a user writes against the installed library's public headers only
// (no reference models, no internals), run as separate processes by
// test_user_models: each numbered case of "a cache hit is always the right
// program" (docs/FORMAT.md, "How a hit is decided").
//
//   user_models CASE DIR [--scale S] [--fast V] [--ge-cache]
// prints "<label> status <outcome> compiled <n> match <yes|no> values ..."
// per cached call, where match compares the cached result with the eager
// result of the same method (within 1e-5) and values are the cached ones.
#include <npucache/npucache.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

using namespace npucache;

namespace {

std::string dir;
double g_scale = 1.0;
bool g_ge_cache = false;
std::string g_fast;  // code_version of the fast path

CacheOptions options() {
  CacheOptions o;
  o.cache_dir = dir;
  o.ge_cache = g_ge_cache;
  CompilerConfig c;
  c.autotune_candidates = 2;
  c.autotune_min_time_us = 0;
  o.compile.config = c;
  if (!g_fast.empty()) {
    o.hit_check = HitCheck::code_version;
    o.code_version = g_fast;
  }
  return o;
}

Tensor input(int64_t rows, int64_t cols, float base) {
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = base + 0.25f * static_cast<float>(i % 7);
  return Tensor::from_vector(v, {rows, cols});
}

bool close(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-5f * (1.0f + std::fabs(b[i]))) return false;
  return true;
}

template <class Method>
void report(const char* label, const Method& m, const std::vector<float>& cached, const std::vector<float>& eager) {
  std::printf("%s status %s compiled %zu match %s entry %s values", label,
              std::string(outcome_name(m.status().outcome)).c_str(), m.compiles(), close(cached, eager) ? "yes" : "no",
              m.status().entry.c_str());
  for (float v : cached) std::printf(" %g", v);
  std::printf("\n");
}

// Case 1: two methods cached without a method name.
struct TwoMethods : nn::Module {
  std::shared_ptr<nn::Linear> proj = register_module("proj", std::make_shared<nn::Linear>(4, 3));
  TwoMethods() {
    std::vector<float> w(12);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i);
    proj->weight.copy_from(w);
    proj->bias.copy_from({1, 2, 3});
  }
  Tensor prompt(const Tensor& x) { return ops::relu(proj->forward(x)); }
  Tensor decode(const Tensor& x) { return ops::sigmoid(proj->forward(x)) * 2.0; }
};

// Case 2: a plain member read from a command-line flag.
struct Scaled : nn::Module {
  double scale = 1.0;
#ifdef USER_MODEL_CHANGE  // the same model after a code change
  Tensor forward(const Tensor& x) { return ops::tanh(x) * scale + 0.75; }
#else
  Tensor forward(const Tensor& x) { return ops::tanh(x) * scale + 0.5; }
#endif
};

}  // namespace

// Case 3: two classes with the same short name in different namespaces.
namespace vision {
struct Net : nn::Module {
  Tensor forward(const Tensor& x) { return x * 2.0 + 1.0; }
};
}  // namespace vision
namespace audio {
struct Net : nn::Module {
  Tensor forward(const Tensor& x) { return ops::exp(x * -1.0); }
};
}  // namespace audio

namespace {

// Case 6: a method returning a struct (any type with visit).
struct Outputs {
  Tensor logits;
  std::vector<Tensor> extras;
  template <class V>
  void visit(V& v) {
    v("logits", logits);
    v("extras", extras);
  }
};
struct StructOut : nn::Module {
  Outputs run(const Tensor& x) {
    Outputs o;
    o.logits = ops::softmax(x, -1);
    o.extras = {x + 1.0, ops::sum(x, {-1}, false)};
    return o;
  }
};

// Case 7: const member functions (a model whose methods do not change it).
struct ConstMethods : nn::Module {
  std::shared_ptr<nn::Linear> proj = register_module("proj", std::make_shared<nn::Linear>(4, 2));
  ConstMethods() {
    proj->weight.copy_from({0.5f, -0.25f, 1.0f, 0.0f, 0.1f, 0.2f, 0.3f, 0.4f});
    proj->bias.copy_from({0.5f, -1.0f});
  }
  Tensor score(const Tensor& x) const { return ops::sigmoid(proj->forward(x)); }
  Tensor gate(const Tensor& x, double scale) const { return ops::relu(proj->forward(x)) * scale; }
};

std::vector<float> flat(const Outputs& o) {
  std::vector<float> v = o.logits.to_vector();
  for (const auto& t : o.extras) {
    auto e = t.to_vector();
    v.insert(v.end(), e.begin(), e.end());
  }
  return v;
}

int run(const std::string& which) {
  if (which == "two-methods") {
    TwoMethods m;
    auto prompt = cache_compile(m, &TwoMethods::prompt, options());
    auto decode = cache_compile(m, &TwoMethods::decode, options());
    const Tensor x = input(2, 4, -1.0f);
    auto p = prompt(x).to_vector();
    report("prompt", prompt, p, m.prompt(x).to_vector());
    auto d = decode(x).to_vector();
    report("decode", decode, d, m.decode(x).to_vector());
    return 0;
  }
  if (which == "scaled") {
    Scaled m;
    m.scale = g_scale;
    auto f = cache_compile(m, &Scaled::forward, options());
    const Tensor x = input(3, 5, -0.5f);
    auto y = f(x).to_vector();
    report("forward", f, y, m.forward(x).to_vector());
    return 0;
  }
  if (which == "namespaces") {
    vision::Net a;
    audio::Net b;
    auto fa = cache_compile(a, &vision::Net::forward, options());
    auto fb = cache_compile(b, &audio::Net::forward, options());
    const Tensor x = input(2, 3, 0.0f);
    auto ya = fa(x).to_vector();
    report("vision", fa, ya, a.forward(x).to_vector());
    auto yb = fb(x).to_vector();
    report("audio", fb, yb, b.forward(x).to_vector());
    return 0;
  }
  if (which == "struct") {
    StructOut m;
    auto f = cache_compile(m, &StructOut::run, options());
    const Tensor x = input(2, 6, 0.1f);
    Outputs first = f(x);
    Outputs second = f(x + 1.0);
    report("struct", f, flat(first), flat(m.run(x)));
    report("struct-again", f, flat(second), flat(m.run(x + 1.0)));
    std::printf("extras %zu\n", second.extras.size());
    return 0;
  }
  if (which == "const") {
    ConstMethods m;
    auto score = cache_compile(m, &ConstMethods::score, options());
    auto gate = cache_compile(m, &ConstMethods::gate, options());
    auto eager_gate = compile(m, &ConstMethods::gate);  // compile() takes const methods too
    const Tensor x = input(3, 4, -0.75f);
    auto s = score(x).to_vector();
    report("score", score, s, m.score(x).to_vector());
    auto g = gate(x, 1.5).to_vector();
    report("gate", gate, g, m.gate(x, 1.5).to_vector());
    auto e = eager_gate(x, 1.5).to_vector();
    report("compiled-gate", eager_gate, e, m.gate(x, 1.5).to_vector());
    return 0;
  }
  std::fprintf(stderr, "unknown case %s\n", which.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: user_models CASE DIR [--scale S] [--fast V] [--ge-cache]\n");
    return 2;
  }
  dir = argv[2];
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
      g_scale = std::stod(argv[++i]);
    else if (std::strcmp(argv[i], "--fast") == 0 && i + 1 < argc)
      g_fast = argv[++i];
    else if (std::strcmp(argv[i], "--ge-cache") == 0)
      g_ge_cache = true;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 3;
  }
}
