// One process of the differential test: a shipped model's method run
// eagerly and through cache_compile with the given options (a cold or warm
// start, depending on the cache directory).
//
//   diff_worker MODEL DIR MODE DYNAMIC GE_CACHE HIT_CHECK
//     MODEL      seed | mlp | tiny-llama
//     MODE       max-autotune | reduce-overhead
//     DYNAMIC, GE_CACHE  0 | 1
//     HIT_CHECK  trace | code_version
// prints "status <outcome> compiled <n> maxdiff <max |cached - eager|>
// bits <xxh64 of the cached results' bytes>".
#include <npucache/models/models.h>
#include <npucache/npucache.h>

#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

using namespace npucache;

namespace {

struct Result {
  std::vector<float> eager, cached;
};

template <class M, class F, class... A>
void both(M& m, F method, const CacheOptions& o, std::vector<Result>& out, int calls, A&&... args) {
  auto cached = cache_compile(m, method, o);
  for (int c = 0; c < calls; ++c) {
    Result r;
    r.cached = cached(args...).to_vector();
    r.eager = (m.*method)(args...).to_vector();
    out.push_back(std::move(r));
  }
  std::printf("status %s compiled %zu\n", std::string(outcome_name(cached.status().outcome)).c_str(),
              cached.compiles());
}

int run(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: diff_worker MODEL DIR MODE DYNAMIC GE_CACHE HIT_CHECK\n");
    return 2;
  }
  const std::string model = argv[1];
  CacheOptions o;
  o.cache_dir = argv[2];
  CompilerConfig c;
  c.mode = parse_compile_mode(argv[3]);
  c.autotune_candidates = 2;
  c.autotune_min_time_us = 0;
  o.compile.config = c;
  o.compile.dynamic = std::strcmp(argv[4], "1") == 0;
  o.ge_cache = std::strcmp(argv[5], "1") == 0;
  if (std::strcmp(argv[6], "code_version") == 0) {
    o.hit_check = HitCheck::code_version;
    o.code_version = "diff-v1";
  }
  std::vector<Result> results;
  if (model == "seed") {
    models::SeedExample m;
    models::InputMeta x{Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}), true};
    std::vector<Tensor> kv{Tensor::from_vector({0.5, 1, 1.5, 2, 2.5, 3}, {3, 2})};
    both(m, &models::SeedExample::prompt, o, results, 2, x, kv);
  } else if (model == "mlp") {
    models::SimpleMLP m;
    std::vector<float> x(2 * 128);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
    both(m, &models::SimpleMLP::forward, o, results, 2, Tensor::from_vector(x, {2, 128}));
  } else if (model == "tiny-llama") {
    models::TinyLlama m({}, {});
    auto kv_c = m.make_kv_cache(1);
    std::vector<int64_t> toks{1, 2, 3, 4, 5, 6}, pos{0, 1, 2, 3, 4, 5};
    // Separate KV caches for the eager and the cached runs (decode reads
    // what prompt wrote).
    auto kv_e = m.make_kv_cache(1);
    auto prompt = cache_compile(m, &models::TinyLlama::prompt, o);
    auto decode = cache_compile(m, &models::TinyLlama::decode, o);
    const Tensor t = Tensor::from_vector_i64(toks, {1, 6}), p = Tensor::from_vector_i64(pos, {1, 6});
    results.push_back({m.prompt(t, p, kv_e).to_vector(), prompt(t, p, kv_c).to_vector()});
    const Tensor t1 = Tensor::from_vector_i64({7}, {1, 1}), p1 = Tensor::from_vector_i64({6}, {1, 1});
    results.push_back({m.decode(t1, p1, kv_e).to_vector(), decode(t1, p1, kv_c).to_vector()});
    std::printf("status %s compiled %zu\n", std::string(outcome_name(prompt.status().outcome)).c_str(),
                prompt.compiles() + decode.compiles());
  } else {
    std::fprintf(stderr, "unknown model %s\n", model.c_str());
    return 2;
  }
  double maxdiff = 0;
  std::string bytes;
  for (const auto& r : results) {
    if (r.eager.size() != r.cached.size()) maxdiff = INFINITY;
    for (std::size_t i = 0; i < r.eager.size() && i < r.cached.size(); ++i)
      maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(r.eager[i] - r.cached[i])));
    bytes.append(reinterpret_cast<const char*>(r.cached.data()), r.cached.size() * sizeof(float));
  }
  std::printf("maxdiff %.3g bits %016llx\n", maxdiff,
              static_cast<unsigned long long>(XXH64(bytes.data(), bytes.size(), 0)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 3;
  }
}
