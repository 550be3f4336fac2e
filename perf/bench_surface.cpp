// The compile surface of seed 003, measured side by side in one run:
//  1. NPUGraph trees: the pool peak of one method's captures of 24 shapes
//     against the largest single capture (goal <= 1.1) and against one pool
//     per capture (the sum of the footprints);
//  2. automatic dynamic: compiles for batch sizes 1..64 in a first cache,
//     in a restart with only the profile, in a restart with the cache;
//  3. update at replay: host time per decode step of an 8-layer decoder
//     with a growing KV length, eager vs one patched capture (goal >= 10x);
//  4. graph breaks: host time per call of a method with one host read,
//     split into pieces (recorded lazily, hashed, looked up, run) vs the
//     same computation without the read, compiled whole and replayed.
// A new cache_compile on a directory stands for a restarted process
// (nothing is shared in memory but the tuning table).
#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include "harness.h"
#include "runtime/pool.h"

#include <time.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

std::vector<float> ramp(int64_t n, float scale, float shift) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = scale * static_cast<float>(i % 13) + shift;
  return v;
}

constexpr int64_t kWidth = 64;

double thread_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Mlp : nn::Module {
  Tensor w1, w2;
  Mlp() {
    w1 = register_parameter("w1", Tensor::from_vector(ramp(kWidth * kWidth, 0.01f, -0.05f), {kWidth, kWidth}));
    w2 = register_parameter("w2", Tensor::from_vector(ramp(kWidth * kWidth, 0.02f, -0.1f), {kWidth, kWidth}));
  }
  std::string type_name() const override { return "BenchMlp"; }
  Tensor forward(const Tensor& x) { return ops::matmul(ops::relu(ops::matmul(x, w1) + 1.0f), w2) * 0.5f; }
  // The two halves of with_read as methods of their own (the floor of a
  // split call: two replays and the host read between them, no recording).
  std::vector<Tensor> first_half(const Tensor& x) {
    Tensor h = ops::relu(ops::matmul(x, w1) + 1.0f);
    return {h, ops::max(h, {0, 1})};
  }
  Tensor second_half(const Tensor& h, const Tensor& scale) { return ops::matmul(h, w2) * scale; }
  // The same computation with a host read in the middle (a graph break).
  Tensor with_read(const Tensor& x) {
    Tensor h = ops::relu(ops::matmul(x, w1) + 1.0f);
    const float s = ops::max(h, {0, 1}).item();
    return ops::matmul(h, w2) * (s > -1.0f ? 0.5f : 1.0f);
  }
};

Tensor batch(int64_t b) { return Tensor::from_vector(ramp(b * kWidth, 0.1f, -0.6f), {b, kWidth}); }

constexpr int64_t kHeads = 4, kHeadDim = 16, kHidden = kHeads * kHeadDim, kLayers = 8, kSeq = 512;

// An 8-layer attention decoder step over per-layer KV caches, attending
// over the first kv_len keys.
struct Decoder : nn::Module {
  std::vector<Tensor> wq, wk, wv, wo;
  Decoder() {
    for (int64_t l = 0; l < kLayers; ++l) {
      const std::string p = "l" + std::to_string(l) + "_";
      const auto n = kHidden * kHidden;
      wq.push_back(register_parameter(p + "wq", Tensor::from_vector(ramp(n, 0.002f, -0.01f), {kHidden, kHidden})));
      wk.push_back(register_parameter(p + "wk", Tensor::from_vector(ramp(n, 0.0015f, -0.007f), {kHidden, kHidden})));
      wv.push_back(register_parameter(p + "wv", Tensor::from_vector(ramp(n, 0.001f, -0.005f), {kHidden, kHidden})));
      wo.push_back(register_parameter(p + "wo", Tensor::from_vector(ramp(n, 0.003f, -0.015f), {kHidden, kHidden})));
    }
  }
  std::string type_name() const override { return "BenchDecoder"; }
  Tensor step(const Tensor& x0, const Tensor& pos, const std::vector<Tensor>& kv, SymInt kv_len) {
    auto heads = [](const Tensor& t) { return t.reshape({1, 1, kHeads, kHeadDim}); };
    Tensor x = x0;
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      Tensor k = ops::buffer_update(kv[2 * i], pos, heads(ops::matmul(x, wk[i])));
      Tensor v = ops::buffer_update(kv[2 * i + 1], pos, heads(ops::matmul(x, wv[i])));
      Tensor q = heads(ops::matmul(x, wq[i])).permute({0, 2, 1, 3});
      Tensor a = ops::fused_attention(q, k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3}), kv_len);
      x = x + ops::tanh(ops::matmul(a.permute({0, 2, 1, 3}).reshape({1, 1, kHidden}), wo[i]));
    }
    return x;
  }
};

std::vector<Tensor> kv_cache() {
  std::vector<Tensor> kv;
  for (int64_t i = 0; i < 2 * kLayers; ++i)
    kv.push_back(Tensor::from_vector(std::vector<float>(kSeq * kHidden, 0.0f), {1, kSeq, kHeads, kHeadDim}));
  return kv;
}

// Pool capacity after capturing `batches` in a fresh thread (its own pool).
std::pair<std::size_t, std::size_t> captured_pool(Mlp& m, const std::vector<int64_t>& batches) {
  std::size_t capacity = 0, peak = 0;
  std::thread([&] {
    CompileOptions o;
    o.mode = "reduce-overhead";
    o.dynamic = true;
    auto f = compile(m, &Mlp::forward, o);
    for (int64_t b : batches) (void)f(batch(b)).to_vector();
    const auto pool = runtime::MemoryPool::of_this_thread(0);
    capacity = pool->capacity();
    peak = pool->peak_capacity();
  }).join();
  return {capacity, peak};
}

// 4. Graph breaks: recording cost per call.
void graph_breaks(Mlp& m, int trials) {
  CompileOptions bo;
  bo.mode = "reduce-overhead";
  bo.dynamic = false;
  auto split = compile(m, &Mlp::with_read, bo);
  auto whole = compile(m, &Mlp::forward, bo);
  auto first = compile(m, &Mlp::first_half, bo);
  auto second = compile(m, &Mlp::second_half, bo);
  const Tensor half = ops::scalar(0.5), one = ops::scalar(1.0);
  Tensor xb = batch(16);
  auto call_variant = [&](int which) {
    return [&, which] {
      const double t0 = perf::now_s();
      Tensor out;
      if (which == 3) {  // the floor: the halves compiled apart, the read between them
        const std::vector<Tensor> a = first(xb);
        out = second(a[0], a[1].item() > -1.0f ? half : one);
      } else {
        out = which == 0 ? m.with_read(xb) : which == 1 ? split(xb) : whole(xb);
      }
      (void)out.to_vector();  // the call's result read, as a server does
      return perf::now_s() - t0;
    };
  };
  const auto g = perf::interleaved({call_variant(0), call_variant(1), call_variant(2), call_variant(3)}, trials);
  std::printf("4. graph breaks: a method with one host read (batch 16), per call incl. reading the result\n");
  std::printf("   eager                        %10.1f us/call\n", g[0] * 1e6);
  std::printf("   split at the break           %10.1f us/call (%zu graph break, 2 pieces, recorded every call)\n",
              g[1] * 1e6, split.status().graph_breaks.size());
  std::printf("   whole graph replayed         %10.1f us/call\n", g[2] * 1e6);
  std::printf("   halves compiled apart        %10.1f us/call (two replays, the read between: the floor)\n",
              g[3] * 1e6);
  std::printf("   split / whole                %10.2fx  (goal <= 1.3x)\n", g[1] / g[2]);
  std::printf("   split / halves               %10.2fx  (the recording's cost)\n", g[1] / g[3]);
  std::printf("   halves / whole               %10.2fx  (the break's own cost: a second replay, a read)\n",
              g[3] / g[2]);
  std::printf("   eager / split                %10.2fx\n", g[0] / g[1]);
}

}  // namespace

// `bench_surface breaks [trials]`: section 4 alone (to profile it).
int main(int argc, char** argv) {
  Mlp m;
  if (argc > 1 && std::string(argv[1]) == "breaks") {
    graph_breaks(m, argc > 2 ? std::atoi(argv[2]) : 300);
    return 0;
  }
  // 1. NPUGraph trees.
  std::vector<int64_t> shapes;
  for (int64_t b = 1; b <= 24; ++b) shapes.push_back(b * 8);
  const auto tree = captured_pool(m, shapes);
  const auto largest = captured_pool(m, {shapes.back()});
  std::size_t sum = 0;
  for (int64_t b : shapes) sum += captured_pool(m, {b}).second;
  std::printf("1. NPUGraph tree: one method, 24 captured shapes (batch 8..192, width %lld)\n",
              static_cast<long long>(kWidth));
  std::printf("   pool peak of the tree        %10zu bytes\n", tree.second);
  std::printf("   largest single capture       %10zu bytes\n", largest.second);
  std::printf("   one pool per capture (sum)   %10zu bytes\n", sum);
  std::printf("   tree / largest               %10.3f  (goal <= 1.1)\n",
              static_cast<double>(tree.second) / static_cast<double>(largest.second));
  std::printf("   tree / one pool per capture  %10.3f\n", static_cast<double>(tree.second) / static_cast<double>(sum));

  // 2. Automatic dynamic, batch 1..64, three "processes".
  const fs::path root = fs::temp_directory_path() / ("npucache-bench-surface-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto serve = [&](const fs::path& dir) {
    CacheOptions o;
    o.cache_dir = dir.string();
    o.compile.dynamic = std::nullopt;
    auto f = cache_compile(m, &Mlp::forward, o);
    for (int64_t b = 1; b <= 64; ++b) (void)f(batch(b));
    return f.compiles();
  };
  const std::size_t first = serve(root / "a");
  fs::create_directories(root / "b");
  fs::copy_file(root / "a" / "profiles.h5", root / "b" / "profiles.h5");
  const std::size_t profiled = serve(root / "b");
  const std::size_t cached = serve(root / "a");
  fs::remove_all(root);
  std::printf("2. automatic dynamic, batch 1..64 in each run\n");
  std::printf("   first run                    %10zu compiles  (goal <= 2)\n", first);
  std::printf("   restart with the profile     %10zu compiles  (goal <= 1)\n", profiled);
  std::printf("   restart with the cache       %10zu compiles  (goal 0)\n", cached);

  // 3. Update at replay: a decode loop with a growing KV length.
  Decoder dec;
  CompileOptions ro;
  ro.mode = "reduce-overhead";
  ro.dynamic = true;
  auto step = compile(dec, &Decoder::step, ro);
  auto kv_eager = kv_cache(), kv_replay = kv_cache();
  Tensor x = Tensor::from_vector(ramp(kHidden, 0.1f, -0.4f), {1, 1, kHidden});
  Device& dev = Platform::get().device(0);
  int64_t t_eager = 0, t_replay = 0;
  std::vector<double> cpu[2];  // the calling thread's CPU time per step
  auto decode_variant = [&](bool replay) {
    return [&, replay] {
      int64_t& t = replay ? t_replay : t_eager;
      t = (t + 1) % (kSeq - 1);
      Tensor pos = Tensor::from_vector_i64({t}, {1, 1});
      const double c0 = thread_cpu_s();
      const double t0 = perf::now_s();
      Tensor out = replay ? step(x, pos, kv_replay, t + 1) : dec.step(x, pos, kv_eager, t + 1);
      const double host = perf::now_s() - t0;
      cpu[replay ? 1 : 0].push_back(thread_cpu_s() - c0);
      dev.synchronize();
      return host;
    };
  };
  const auto d = perf::interleaved({decode_variant(false), decode_variant(true)}, 300);
  std::printf("3. update at replay: %lld-layer decode step, KV length growing every step\n",
              static_cast<long long>(kLayers));
  std::printf("   eager                        %10.1f us/step (host)\n", d[0] * 1e6);
  std::printf("   one capture, kv_len patched  %10.1f us/step (host), %zu capture(s), %zu compile(s)\n", d[1] * 1e6,
              step.status().captures, step.compiles());
  std::printf("   eager / replay               %10.1fx  (goal >= 10x)\n", d[0] / d[1]);
  // The same steps in the calling thread's CPU time: without the time the
  // thread waited for a core (a woken stream worker may take the caller's
  // core on a loaded machine).
  const double ce = perf::median(cpu[0]), cr = perf::median(cpu[1]);
  std::printf("   calling thread CPU: eager %.1f us, replay %.1f us: %.1fx\n", ce * 1e6, cr * 1e6, ce / cr);

  graph_breaks(m, 300);
  return 0;
}
