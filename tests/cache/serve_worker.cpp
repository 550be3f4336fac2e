// A serving process for the tests of the compile surface with a cache: a
// cached method called with a sequence of batch sizes, as a server sees
// requests. A warm start is a new process.
//
//   serve_worker DIR [--batches 1,4,8] [--dynamic auto|true|false]
//                [--mode M] [--backend B] [--breaks] [--fullgraph]
//                [--method NAME] [--methods N] [--scale S] [--weights W]
//                [--routed] [--decode-threads STEPS [--one-by-one]] [--prepare]
//
// --mode and --backend are compile()'s (torch.compile's) surface, given to
// cache_compile; --breaks runs a method with a host read in the middle (a
// graph break); --routed runs three same-shaped layers with a host read
// after each (pieces of one structure reading other parameters);
// --fullgraph asks for one full graph. --method names the
// cached method (${func}); --methods N caches N methods of the same code
// (NAME_0 ... NAME_{N-1}), each called with every batch in turn; --scale
// multiplies the result by a plain member (another graph, the same model);
// --weights multiplies the weights (another model's values, same shapes, the
// same graph); --decode-threads STEPS runs a decode loop of STEPS steps per
// batch, each batch in a request thread of its own, all at once (a KV cache
// updated in place, the step's KV length a SymInt: automatic dynamic makes
// the SymInt and then the batch dynamic, in an order the threads' timing
// decides; --one-by-one starts each thread when the one before it ended, as
// requests that arrive apart), printing "thread <batch> steps <n>" instead
// of call lines.
// Prints one line per call, "call <batch> <outcome> <replayed
// 0|1> breaks <n>", then "compiles <n>" (compiles this process did),
// "dynamic <dims>", "maxdiff <max |cached - eager|>" and "templates recorded
// <n> restored <n> recaptured <n>" (captures made, restored from the cache's
// templates, and stored templates that could not be used, with "recapture
// <reason>"), summed over the methods.
//
// --prepare is a warmup without weights: the model's parameters are meta
// tensors and nothing runs; for each batch the method is prepared three
// times -- without hints, then with the host read's value hinted positive
// and negative (both sides of a branch) -- each printing "prepare <batch>
// <hint none|pos|neg> <outcome> pieces <n>" and, when it stopped,
// "stopped <where>"; then "compiles <n>".
#include <npucache/cache.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include "support/small_models.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace npucache;
using testing_support::ramp;

namespace {

struct Server : nn::Module {
  Tensor w, bias;
  std::vector<Tensor> layers;
  float scale = 1.0f;  // a plain member: another value, another graph of the same model
  // `meta`: parameters without values (a warmup without weights).
  explicit Server(float weights = 1.0f, bool meta = false) {
    auto param = [meta](std::vector<float> v, std::vector<int64_t> dims) {
      return meta ? Tensor::meta(dims) : Tensor::from_vector(v, dims);
    };
    w = register_parameter("w", param(ramp(32 * 32, 0.01f * weights, -0.05f * weights), {32, 32}));
    bias = register_parameter("bias", param(ramp(32, 0.02f * weights, -0.1f * weights), {32}));
    for (int i = 0; i < 3; ++i)
      layers.push_back(
          register_parameter("layer" + std::to_string(i),
                             param(ramp(32 * 32, 0.01f * weights * (i + 1), -0.04f * weights * (i + 1)), {32, 32})));
  }
  std::string type_name() const override { return "Server"; }
  Tensor forward(const Tensor& x) {
    Tensor h = ops::matmul(x, w) + bias;
    return ops::sigmoid(h * 2.0f - 1.0f) * h * scale;
  }
  // A host read between two computations: a graph break.
  Tensor branchy(const Tensor& x) {
    Tensor h = ops::matmul(x, w) + bias;
    const float total = ops::sum(h, {0, 1}).item();
    Tensor y = total > 0 ? ops::relu(h) : ops::tanh(h);
    return ops::matmul(y, w) * 0.5f;
  }
  // Same-shaped layers with a host read after each (an early-exit check).
  Tensor routed(const Tensor& x) {
    Tensor h = x;
    for (const Tensor& l : layers) {
      h = ops::tanh(ops::matmul(h, l));
      if (ops::sum(h, {0, 1}).item() > 1e9f) break;  // never taken
    }
    return h * 2.0f;
  }
};

// An attention layer's decode step, batch B: x [B, 1, 8], pos [B, 1] (i64),
// the KV caches [B, S, 2, 4] written at pos; attends over the first kv_len
// keys.
struct Decoder : nn::Module {
  Tensor wq, wk, wv;
  Decoder() {
    wq = register_parameter("wq", Tensor::from_vector(ramp(64, 0.02f, -0.1f), {8, 8}));
    wk = register_parameter("wk", Tensor::from_vector(ramp(64, 0.015f, -0.07f), {8, 8}));
    wv = register_parameter("wv", Tensor::from_vector(ramp(64, 0.01f, -0.05f), {8, 8}));
  }
  std::string type_name() const override { return "Decoder"; }
  Tensor decode(const Tensor& x, const Tensor& pos, const Tensor& kc, const Tensor& vc, SymInt kv_len) {
    const SymExpr B = x.size(0);
    auto heads = [&](const Tensor& t) { return t.reshape({B, 1, 2, 4}); };
    Tensor k = ops::buffer_update(kc, pos, heads(ops::matmul(x, wk)));
    Tensor v = ops::buffer_update(vc, pos, heads(ops::matmul(x, wv)));
    Tensor q = heads(ops::matmul(x, wq)).permute({0, 2, 1, 3});
    Tensor a = ops::fused_attention(q, k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3}), kv_len);
    return ops::tanh(a.permute({0, 2, 1, 3}).reshape({B, 1, 8})) + x;
  }
};

// Decode loops of `steps` steps, one request thread per batch, all at
// once, each checked against eager code on caches of its own.
template <class Fn>
int decode_threads(Decoder& m, Fn& fn, const std::vector<int64_t>& batches, int64_t steps, bool one_by_one,
                   double& maxdiff, CallStatus& last) {
  std::mutex mu;
  std::string failure;
  std::vector<std::thread> threads;
  for (int64_t b : batches) {
    threads.emplace_back([&, b] {
      try {
        auto zeros = [&] {
          return Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(b * steps * 8), 0.0f),
                                     {b, steps, 2, 4});
        };
        Tensor kc = zeros(), vc = zeros(), kce = zeros(), vce = zeros();
        Tensor x = Tensor::from_vector(ramp(b * 8, 0.1f, -0.4f), {b, 1, 8}), xe = x;
        double worst = 0;
        for (int64_t t = 0; t < steps; ++t) {
          const Tensor pos = Tensor::from_vector_i64(std::vector<int64_t>(static_cast<std::size_t>(b), t), {b, 1});
          x = fn(x, pos, kc, vc, t + 1).clone();
          xe = m.decode(xe, pos, kce, vce, t + 1);
          const auto got = x.to_vector(), want = xe.to_vector();
          for (std::size_t k = 0; k < got.size(); ++k)
            worst = std::max(worst, static_cast<double>(std::fabs(got[k] - want[k])));
        }
        const CallStatus& s = fn.status();  // this thread's: the counts as of its last call
        std::lock_guard lock(mu);
        maxdiff = std::max(maxdiff, worst);
        last.recorded = std::max(last.recorded, s.recorded);
        last.restored = std::max(last.restored, s.restored);
        last.recaptured = std::max(last.recaptured, s.recaptured);
        if (!s.recapture_reason.empty()) last.recapture_reason = s.recapture_reason;
        std::printf("thread %lld steps %lld\n", static_cast<long long>(b), static_cast<long long>(steps));
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failure = e.what();
      }
    });
    if (one_by_one) threads.back().join();
  }
  for (auto& t : threads)
    if (t.joinable()) t.join();
  if (failure.empty()) return 0;
  std::fprintf(stderr, "serve_worker: %s\n", failure.c_str());
  return 1;
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: serve_worker DIR [options]\n");
    return 2;
  }
  CacheOptions o;
  o.cache_dir = argv[1];
  std::vector<int64_t> batches = {1, 4, 8};
  bool breaks = false, routed = false, prepare = false;
  std::string name;
  int methods = 1;
  int64_t decode_steps = 0;
  bool one_by_one = false;
  float scale = 1.0f, weights = 1.0f;
  o.compile.fullgraph = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--batches") {
      batches = parse_list(next().c_str());
    } else if (a == "--dynamic") {
      const std::string v = next();
      if (v == "auto")
        o.compile.dynamic = std::nullopt;
      else
        o.compile.dynamic = v == "true";
    } else if (a == "--mode") {
      o.compile.mode = next();
    } else if (a == "--capture-limit") {
      o.compile.capture_limit = std::stoul(next());
    } else if (a == "--backend") {
      o.compile.backend = next();
    } else if (a == "--breaks") {
      breaks = true;
    } else if (a == "--routed") {
      routed = true;
    } else if (a == "--decode-threads") {
      decode_steps = std::stoll(next());
    } else if (a == "--one-by-one") {
      one_by_one = true;
    } else if (a == "--prepare") {
      prepare = true;
    } else if (a == "--fullgraph") {
      o.compile.fullgraph = true;
    } else if (a == "--method") {
      name = next();
    } else if (a == "--methods") {
      methods = std::stoi(next());
    } else if (a == "--scale") {
      scale = std::stof(next());
    } else if (a == "--weights") {
      weights = std::stof(next());
    } else {
      throw std::runtime_error("unknown option " + a);
    }
  }
  if (decode_steps > 0) {
    Decoder d;
    CacheOptions od = o;
    if (!name.empty()) od.compile.method_name = name;
    auto fn = cache_compile(d, &Decoder::decode, od);
    double maxdiff = 0;
    CallStatus s;  // the counts of the thread that saw the most (they only grow)
    if (decode_threads(d, fn, batches, decode_steps, one_by_one, maxdiff, s) != 0) return 1;
    std::printf("compiles %zu\n", fn.compiles());
    std::printf("maxdiff %.9g\n", maxdiff);
    std::printf("templates recorded %zu restored %zu recaptured %zu\n", s.recorded, s.restored, s.recaptured);
    if (!s.recapture_reason.empty()) std::printf("recapture %s\n", s.recapture_reason.c_str());
    return 0;
  }
  Server m(weights, prepare);
  m.scale = scale;
  auto method = routed ? &Server::routed : breaks ? &Server::branchy : &Server::forward;
  std::vector<CompiledMethod<Server, Tensor, const Tensor&>> fns;
  for (int k = 0; k < methods; ++k) {
    CacheOptions ok = o;
    if (!name.empty()) ok.compile.method_name = methods == 1 ? name : name + "_" + std::to_string(k);
    fns.push_back(cache_compile(m, method, ok));
  }
  if (prepare) {
    std::size_t compiles = 0;
    for (auto& fn : fns) {
      for (int64_t b : batches)
        for (const char* hint : {"none", "pos", "neg"}) {
          PrepareHints hints;
          if (std::string(hint) != "none")
            hints.value = [hint](const HostRead&) -> std::optional<std::vector<double>> {
              return std::vector<double>{std::string(hint) == "pos" ? 1.0 : -1.0};
            };
          const CallStatus& s = fn.prepare(hints, Tensor::meta({b, 32}));
          std::printf("prepare %lld %s %s pieces %zu\n", static_cast<long long>(b), hint,
                      std::string(outcome_name(s.outcome)).c_str(), s.pieces);
          if (!s.stopped_at.empty()) std::printf("stopped %s\n", s.stopped_at.c_str());
        }
      compiles += fn.compiles();
    }
    std::printf("compiles %zu\n", compiles);
    return 0;
  }
  double maxdiff = 0;
  for (auto& fn : fns)
    for (int64_t b : batches) {
      Tensor x = Tensor::from_vector(ramp(b * 32, 0.1f, -0.6f), {b, 32});
      const std::vector<float> got = fn(x).to_vector(), want = (m.*method)(x).to_vector();
      if (got.size() != want.size()) {
        std::printf("size mismatch at batch %lld\n", static_cast<long long>(b));
        return 1;
      }
      for (std::size_t k = 0; k < got.size(); ++k)
        maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(got[k] - want[k])));
      const CallStatus& s = fn.status();
      std::printf("call %lld %s %d breaks %zu\n", static_cast<long long>(b),
                  std::string(outcome_name(s.outcome)).c_str(), s.replayed ? 1 : 0, s.graph_breaks.size());
      std::fflush(stdout);
    }
  std::size_t compiles = 0;
  for (auto& fn : fns) compiles += fn.compiles();
  auto& fn = fns.back();
  std::printf("compiles %zu\n", compiles);
  std::string dims;
  for (const auto& d : fn.status().dynamic_dims) dims += (dims.empty() ? "" : ",") + d;
  std::printf("dynamic %s\n", dims.empty() ? "-" : dims.c_str());
  std::printf("maxdiff %.9g\n", maxdiff);
  std::size_t recorded = 0, restored = 0, recaptured = 0;
  std::string reason;
  for (auto& f : fns) {
    const CallStatus& s = f.status();
    recorded += s.recorded;
    restored += s.restored;
    recaptured += s.recaptured;
    if (!s.recapture_reason.empty()) reason = s.recapture_reason;
  }
  std::printf("templates recorded %zu restored %zu recaptured %zu\n", recorded, restored, recaptured);
  std::printf("captures %zu\n", fn.status().captures);
  if (!reason.empty()) std::printf("recapture %s\n", reason.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "serve_worker: %s\n", e.what());
  return 1;
}
