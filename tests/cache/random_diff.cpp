// The differential hunt: random small models (random_model.h) and calling
// patterns, run through cache_compile against ONE cache directory by a
// sequence of processes, so the entries one model writes are looked up by
// the next ones (models derive from earlier ones: the same program with
// new weights, another layer flag, a constant, an op, an option, another
// guard value). Every result of a cached method must equal the eager
// result of the same call (within 1e-4, relative), whether it was a hit, a
// compile or a recompile; a call must fail exactly when the eager call
// fails; a reduce-overhead result read after a later call is either still
// its value or a DeviceError. A hit that returns another value is the bug
// this hunts.
//
//   random_diff [--seed N] [--epochs E] [--models N] [--seconds S] [--per-process N]
//     runs E epochs (default 1) of N models (default 32) from seed N
//     (default 1), each epoch in a fresh cache directory, --per-process
//     models per process (default 4), stopping early when S seconds
//     (default 60) have passed. Every other epoch runs two processes at a
//     time on its directory, so writes race with lookups. NPUCACHE_DIFF_SEED overrides --seed;
//     NPUCACHE_DIFF_SECONDS=T runs epochs until T seconds have passed (the
//     release run: NPUCACHE_DIFF_SECONDS=1800 build/tests/random_diff).
//   random_diff --epoch-seed X --models N [--pairs 1] [--list 1]
//     replays one epoch's first N models from an empty cache (two
//     processes at a time with --pairs 1): the command a failure prints;
//     --list 1 prints the models (program and options) instead.
//   random_diff --replay X:N[:G],X:N[:G],...
//     replays several epochs (the regressions ctest keeps), each with
//     generator G (default --generator's).
//   random_diff --worker --epoch-seed X --first I --count N --dir D
//     one process of an epoch (run by the others).
//   --generator 1|2|3 (every form): which models are drawn; 2 adds graph
//     breaks (host reads between same-shaped layers, branches on truth
//     values) with fullgraph=false, and automatic dynamic; 3, the default,
//     adds compile regions (repeated blocks of two shapes with weights of
//     their own, called through nn::compile_region, sometimes the same
//     block twice, sometimes with graph breaks in the method or a body),
//     the default mode and regions off; 1 and 2 draw the models before
//     them (the regressions found with them replay with them).
//
// Exit status 0 when every result matched, 1 on a wrong result or failure
// (printed with the model, its options, the call and the command that
// replays it), 2 on a usage error.
#include "random_model.h"
#include "support/temp_dir.h"

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>

using namespace npucache;
using namespace npucache::randtest;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;
constexpr double kSMenu[] = {0.5, 1.5, -2.0, 1e-7, 1e-9};

struct Options {
  bool reduce_overhead = false, dynamic = true, ge_cache = false, pair = false;
  bool fresh_outputs = false, copy_inputs = false, no_fusion = false, single_stream = false;
  // Generator 2: fullgraph=false (the method may run as pieces between
  // graph breaks), and automatic dynamic (dynamic unset).
  bool breaks = false, auto_dynamic = false;
  // Generator 3: the inductor backend's default mode (instead of TorchAir's
  // max-autotune or reduce-overhead), and regions off (traced inline).
  bool default_mode = false, regions_off = false;
  // Generator 3: NPUCACHE_CHECK_REGIONS (every call traces its body, which
  // must be its signature's): no honest model may fail it.
  bool check_regions = false;
  int method_name = 0;  // "f" or "g"
  std::string text() const {
    std::string t = default_mode ? "default" : reduce_overhead ? "reduce-overhead" : "max-autotune";
    t += auto_dynamic ? " automatic-dynamic" : dynamic ? " dynamic" : " static";
    if (breaks) t += " fullgraph=false";
    if (regions_off) t += " regions=false";
    if (check_regions) t += " NPUCACHE_CHECK_REGIONS=1";
    if (ge_cache) t += " ge_cache";
    t += pair ? " forward_pair" : " forward";
    t += method_name ? " as g" : " as f";
    if (fresh_outputs) t += " fresh_outputs";
    if (copy_inputs) t += " copy_inputs";
    if (no_fusion) t += " no_fusion";
    if (single_stream) t += " single_stream";
    return t;
  }
};

// One model of an epoch: its program, options, weights and the call
// arguments it starts from.
struct Model {
  Program program;
  Options options;
  std::uint64_t weight_seed = 0;
  int batch = 2, seq = 4;
  double s = 0.5;
  std::int64_t k = 1;
};

void flip_option(Options& o, Rng& r) {
  switch (r.below(6)) {
    case 0: o.reduce_overhead = !o.reduce_overhead; break;
    case 1: o.dynamic = !o.dynamic; break;
    case 2: o.ge_cache = !o.ge_cache; break;
    case 3: o.pair = !o.pair; break;
    case 4: o.fresh_outputs = !o.fresh_outputs; break;
    default: o.method_name ^= 1; break;
  }
}

Options random_options(Rng& r) {
  Options o;
  o.reduce_overhead = r.chance(0.5);
  o.dynamic = r.chance(0.5);
  o.ge_cache = r.chance(0.5);
  o.pair = r.chance(0.25);
  o.method_name = r.chance(0.75) ? 0 : 1;
  o.fresh_outputs = r.chance(0.2);
  o.copy_inputs = o.reduce_overhead && r.chance(0.15);
  o.no_fusion = r.chance(0.1);
  o.single_stream = r.chance(0.1);
  return o;
}

// Which models the hunt draws: 1, the models before graph breaks; 2, also
// graph breaks (host reads between same-shaped layers, branches on truth
// values), fullgraph=false and automatic dynamic; 3 (the default), also
// compile regions, the default mode and regions off. Each generator draws
// from a stream of its own, so every model of the ones before is still
// drawn (with blocks registered, which generator 3 models all have).
int g_generator = 3;

// The models of an epoch, each derived from the seed and the models before
// it: most copy an earlier model and change a little, so entries collide.
std::vector<Model> plan(std::uint64_t epoch_seed, int n) {
  std::vector<Model> models;
  for (int i = 0; i < n; ++i) {
    Rng r(mix(epoch_seed, static_cast<std::uint64_t>(i)));
    Model m;
    const bool fresh = models.empty() || r.chance(0.3);
    if (fresh) {
      m.program = random_program(r, r.chance(0.8) ? 8 : 4);
      m.options = random_options(r);
      m.batch = 1 + r.below(2);
      m.seq = 2 + r.below(4);
      m.s = kSMenu[r.below(5)];
      m.k = 1 + r.below(3);
    } else {
      m = models[static_cast<std::size_t>(r.below(static_cast<int>(models.size())))];
      // 0 changes: the same computation with new weights (must hit).
      const int changes = r.below(3);
      for (int c = 0; c < changes; ++c) {
        switch (r.below(5)) {
          case 0:
          case 1: mutate(m.program, r); break;
          case 2: flip_option(m.options, r); break;
          case 3: m.s = kSMenu[r.below(5)]; break;
          default: m.seq = 2 + r.below(4); break;
        }
      }
      m.options.copy_inputs = m.options.copy_inputs && m.options.reduce_overhead;
    }
    m.weight_seed = r.next();
    if (g_generator >= 2) {
      Rng x(mix(mix(epoch_seed, static_cast<std::uint64_t>(i)), 0x627265616b73));
      // Generator 3 breaks fewer methods: a break runs the regions inline.
      if (x.chance(0.35) && (g_generator < 3 || x.chance(0.4))) add_breaks(m.program, x);
      if (x.chance(0.2)) m.options.breaks = !m.options.breaks;
      if (x.chance(0.2)) m.options.auto_dynamic = !m.options.auto_dynamic;
    }
    if (g_generator >= 3) {
      Rng z(mix(mix(epoch_seed, static_cast<std::uint64_t>(i)), 0x726567696f6e73));
      // A derived model mostly keeps its regions (so that hits happen).
      const double change = fresh ? 1.0 : 0.5;
      if (!m.program.blocks) add_blocks(m.program, z);
      if (!has_regions(m.program) ? z.chance(0.7 * change) : z.chance(0.2 * change)) add_regions(m.program, z);
      if (has_regions(m.program) && z.chance(0.4 * change)) mutate_regions(m.program, z);
      if (z.chance(0.1 * change)) add_body_break(m.program, z);
      if (z.chance(0.15 * change)) m.options.regions_off = !m.options.regions_off;
      if (z.chance(0.2 * change)) m.options.default_mode = !m.options.default_mode;
      m.options.check_regions = z.chance(0.25);
    }
    m.options.breaks = m.options.breaks || has_breaks(m.program);
    models.push_back(m);
  }
  return models;
}

std::string args_text(const Args& a) {
  const auto d = a.x.dims();
  char buf[128];
  std::snprintf(buf, sizeof buf, "B=%lld S=%lld s=%g k=%lld", static_cast<long long>(d[0]),
                static_cast<long long>(d[1]), a.s, static_cast<long long>(a.k));
  return buf;
}

Args make_args(Rng& r, int b, int s, int d, double sv, std::int64_t k) {
  Args a;
  const std::size_t n = static_cast<std::size_t>(b * s * d);
  std::vector<float> x(n), y(n), idx(n);
  std::vector<int64_t> ids(static_cast<std::size_t>(b * s)), gidx(n);
  for (auto& e : x) e = static_cast<float>(r.uniform(-1, 1));
  for (auto& e : y) e = static_cast<float>(r.uniform(-1, 1));
  for (auto& e : ids) e = -1 + r.below(kVocab + 2);
  for (auto& e : gidx) e = r.below(d);
  a.x = Tensor::from_vector(x, {b, s, d});
  a.y = Tensor::from_vector(y, {b, s, d});
  a.ids = Tensor::from_vector_i64(ids, {b, s});
  a.idx = Tensor::from_vector_i64(gidx, {b, s, d});
  a.s = sv;
  a.k = k;
  return a;
}

// A KV cache [B, kMaxSeq, D] of random values.
Tensor make_kv(Rng& r, int b, int d) {
  std::vector<float> v(static_cast<std::size_t>(b * kMaxSeq * d));
  for (auto& e : v) e = static_cast<float>(r.uniform(-1, 1));
  return Tensor::from_vector(v, {b, kMaxSeq, d});
}

struct Failure {
  std::string what;
};

// "" when `cached` equals `eager` within the tolerance, else the first
// difference.
std::string compare(const std::vector<std::vector<float>>& eager, const std::vector<std::vector<float>>& cached) {
  if (eager.size() != cached.size())
    return "results: " + std::to_string(cached.size()) + " cached, " + std::to_string(eager.size()) + " eager";
  for (std::size_t o = 0; o < eager.size(); ++o) {
    if (eager[o].size() != cached[o].size())
      return "result " + std::to_string(o) + " has " + std::to_string(cached[o].size()) + " elements cached, " +
             std::to_string(eager[o].size()) + " eager";
    for (std::size_t i = 0; i < eager[o].size(); ++i) {
      const double e = eager[o][i], c = cached[o][i];
      const bool both_nan = std::isnan(e) && std::isnan(c);
      if (!both_nan && !(std::fabs(e - c) <= kTolerance * std::max(1.0, std::fabs(e)))) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "result %zu element %zu: cached %.9g, eager %.9g", o, i, c, e);
        return buf;
      }
    }
  }
  return "";
}

template <class Method>
std::vector<std::vector<float>> values(Method& call, const Args& a, std::vector<Tensor>* keep) {
  std::vector<Tensor> outs;
  if constexpr (std::is_same_v<decltype(call(a)), Tensor>)
    outs.push_back(call(a));
  else
    outs = call(a);
  std::vector<std::vector<float>> v;
  for (const Tensor& t : outs) {
    try {
      v.push_back(t.to_vector());
    } catch (const Error& e) {
      // Which result: the rest of the message says what happened to it.
      if (dynamic_cast<const DeviceError*>(&e))
        throw DeviceError("result " + std::to_string(v.size()) + ": " + e.what());
      throw;
    }
  }
  if (keep) *keep = outs;
  return v;
}

CacheOptions cache_options(const Options& o, const std::string& dir) {
  CacheOptions c;
  c.cache_dir = dir;
  CompilerConfig cc;
  cc.mode = o.reduce_overhead ? CompileMode::reduce_overhead : CompileMode::max_autotune;
  cc.autotune_candidates = 2;
  cc.autotune_min_time_us = 0;
  cc.autotune_repetitions = 1;
  cc.fusion = !o.no_fusion;
  cc.ge_config.enable_single_stream = o.single_stream;
  if (o.copy_inputs) cc.input_handling = InputHandling::copy;
  c.compile.config = cc;
  if (o.default_mode) {
    c.compile.config.reset();
    c.compile.mode = "default";
  }
  c.compile.regions = !o.regions_off;
  c.compile.dynamic = o.auto_dynamic ? std::nullopt : std::optional<bool>(o.dynamic);
  c.compile.fullgraph = !o.breaks;
  c.compile.method_name = o.method_name ? "g" : "f";
  c.compile.replay_outputs = o.fresh_outputs ? ReplayOutputs::fresh : ReplayOutputs::pool;
  c.ge_cache = o.ge_cache;
  return c;
}

// Runs model `i`'s calls, eager and cached; returns the outcomes ("hit
// compiled ...") or throws Failure.
template <class R>
std::string run_calls(RandNet& net,
                      R (RandNet::*method)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                           double, std::int64_t),
                      const Model& m, const std::string& dir, Rng& r) {
  auto cached = cache_compile(net, method, cache_options(m.options, dir));
  // Each side has its own KV cache, updated in place call after call: they
  // must stay equal.
  Tensor kv_eager, kv_cached;
  auto eager_call = [&](const Args& a) { return (net.*method)(a.x, a.y, a.ids, a.idx, kv_eager, a.s, a.k); };
  auto cached_call = [&](const Args& a) { return cached(a.x, a.y, a.ids, a.idx, kv_cached, a.s, a.k); };
  const int d = m.program.width;
  int b = m.batch, s = m.seq;
  auto new_kv = [&] {
    kv_eager = make_kv(r, b, d);
    kv_cached = Tensor::from_vector(kv_eager.to_vector(), {b, kMaxSeq, d});
  };
  double sv = m.s;
  std::int64_t k = m.k;
  Args args = make_args(r, b, s, d, sv, k);
  new_kv();
  std::vector<Tensor> prev;  // the previous call's cached results
  std::vector<std::vector<float>> prev_values;
  std::string outcomes;
  const int calls = 3 + r.below(4);
  for (int c = 0; c < calls; ++c) {
    std::string pattern = "fresh";
    if (c > 0) {
      const int p = r.below(20);
      if (p < 5) {
        args = make_args(r, b, s, d, sv, k);
      } else if (p < 8) {
        std::swap(args.x, args.y);
        pattern = "swapped";
      } else if (p < 11) {
        args.y = args.x;
        pattern = "same tensor twice";
      } else if (p < 16 && !prev.empty()) {
        args.x = prev[0];  // the decode loop: h = step(h)
        pattern = "previous result fed back";
      } else if (p < 18) {
        s = 1 + r.below(5);  // 1 is below some slices' bounds: eager fails
        if (r.chance(0.3)) {
          b = 3 - b;
          new_kv();
        }
        args = make_args(r, b, s, d, sv, k);
        pattern = "new shape";
      } else {
        if (r.chance(0.5))
          sv = kSMenu[r.below(5)];
        else
          k = 1 + r.below(3);
        args = make_args(r, b, s, d, sv, k);
        pattern = "new guard value";
      }
    }
    const std::string where = "call " + std::to_string(c) + " (" + pattern + ", " + args_text(args) + ")";
    std::optional<std::vector<std::vector<float>>> eager;
    std::string eager_error;
    try {
      eager = values(eager_call, args, nullptr);
    } catch (const Error& e) {
      eager_error = e.what();
    }
    // The arguments' values: a result fed back is overwritten by this very
    // replay (its memory is the pool's), so later calls get copies.
    const bool fed_back = pattern == "previous result fed back";
    const auto xv = fed_back ? args.x.to_vector() : std::vector<float>{};
    std::vector<Tensor> outs;
    std::optional<std::vector<std::vector<float>>> got;
    std::string cached_error;
    try {
      got = values(cached_call, args, &outs);
    } catch (const Error& e) {
      cached_error = e.what();
    }
    const CallStatus& st = cached.status();
    const std::string outcome = std::string(outcome_name(st.outcome)) + (st.cached ? "" : "(uncached)");
    if (eager && !got)
      throw Failure{where + ": the cached call failed where eager code ran (" + outcome + "): " + cached_error};
    if (!eager && got)
      throw Failure{where + ": the cached call returned a result (" + outcome +
                    ") where eager code fails: " + eager_error};
    if (eager) {
      if (std::string diff = compare(*eager, *got); !diff.empty())
        throw Failure{where + ": WRONG RESULT, " + outcome + " (" + st.reason + "): " + diff};
      if (std::string diff = compare({kv_eager.to_vector()}, {kv_cached.to_vector()}); !diff.empty())
        throw Failure{where + ": WRONG KV CACHE after the call, " + outcome + " (" + st.reason + "): " + diff};
    } else {
      // A failed call may have updated neither, or only one: start again.
      new_kv();
    }
    outcomes += (outcomes.empty() ? "" : " ") + (eager ? outcome : "error");
    if (fed_back) args.x = Tensor::from_vector(xv, {b, s, d});
    // A result kept from the previous call: still its value, or a
    // DeviceError saying a later replay overwrote it.
    for (std::size_t o = 0; o < prev.size(); ++o) {
      try {
        const auto again = prev[o].to_vector();
        if (again != prev_values[o])
          throw Failure{where + ": result " + std::to_string(o) +
                        " of the previous call changed under the caller without an error"};
      } catch (const DeviceError&) {
      }
    }
    if (got) {
      prev = outs;
      prev_values = *got;
      if (prev[0].dims() != std::vector<int64_t>{b, s, d}) prev.clear();
    } else {
      prev.clear();
    }
  }
  return outcomes;
}

int worker(std::uint64_t epoch_seed, int first, int count, const std::string& dir) {
  const auto models = plan(epoch_seed, first + count);
  for (int i = first; i < first + count; ++i) {
    const Model& m = models[static_cast<std::size_t>(i)];
    Rng r(mix(m.weight_seed, 0x63616c6c));
    std::string outcomes;
    if (m.options.check_regions)
      ::setenv("NPUCACHE_CHECK_REGIONS", "1", 1);
    else
      ::unsetenv("NPUCACHE_CHECK_REGIONS");
    try {
      RandNet net(m.program, m.weight_seed);
      outcomes = m.options.pair ? run_calls(net, &RandNet::forward_pair, m, dir, r)
                                : run_calls(net, &RandNet::forward, m, dir, r);
    } catch (const Failure& f) {
      std::printf("FAIL model %d: %s\n  program: %s\n  options: %s\n", i, f.what.c_str(), describe(m.program).c_str(),
                  m.options.text().c_str());
      return 1;
    } catch (const std::exception& e) {
      std::printf("FAIL model %d: %s\n  program: %s\n  options: %s\n", i, e.what(), describe(m.program).c_str(),
                  m.options.text().c_str());
      return 1;
    }
    std::printf("model %d: %s\n", i, outcomes.c_str());
    std::fflush(stdout);
  }
  return 0;
}

struct Run {
  FILE* pipe = nullptr;
  int first = 0, count = 0;
  int status = 0;
  std::string text;
};

// Starts `self args` with its output on a pipe.
Run start(const std::string& args) {
  Run r;
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  r.pipe = ::popen((self + " " + args + " --generator " + std::to_string(g_generator) + " 2>&1").c_str(), "r");
  if (!r.pipe) r.status = 127;
  return r;
}

// Reads its output and waits for it.
void finish(Run& r) {
  if (!r.pipe) return;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), r.pipe)) r.text += buf.data();
  const int st = ::pclose(r.pipe);
  r.pipe = nullptr;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// One epoch: models [0, n) in processes of `per` models, one cache
// directory; with `pairs`, two processes at a time (their writes race with
// each other's lookups). Returns false on a failure (printed).
bool epoch(std::uint64_t epoch_seed, int n, int per, bool pairs, double deadline_s, int* ran,
           std::map<std::string, int>* outcomes, const std::chrono::steady_clock::time_point t0) {
  const testing_support::TempDir tmp("random-diff");
  const fs::path dir = tmp.path() / "cache";
  bool ok = true;
  for (int first = 0; first < n && ok;) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > deadline_s) break;
    std::vector<Run> runs;
    for (int k = 0; k < (pairs ? 2 : 1) && first < n; ++k, first += per) {
      const int count = std::min(per, n - first);
      Run w = start("--worker --epoch-seed " + hex(epoch_seed) + " --first " + std::to_string(first) + " --count " +
                    std::to_string(count) + " --dir " + dir.string());
      w.first = first;
      w.count = count;
      runs.push_back(w);
    }
    for (Run& w : runs) {
      finish(w);
      std::printf("%s", w.text.c_str());
      std::istringstream lines(w.text);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("model ", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        for (std::string o; words >> o;) ++(*outcomes)[o];
      }
      if (w.status != 0) {
        std::printf(
            "\nFAILED (process of models %d-%d exited with status %d). Replay from an empty cache%s:\n"
            "  %s --epoch-seed %s --models %d%s --generator %d\n",
            w.first, w.first + w.count - 1, w.status,
            pairs ? " (two processes at a time: the race may take several replays)" : "",
            fs::read_symlink("/proc/self/exe").c_str(), hex(epoch_seed).c_str(), w.first + w.count,
            pairs ? " --pairs 1" : "", g_generator);
        ok = false;
      } else {
        *ran += w.count;
      }
    }
  }
  return ok;
}

int usage() {
  std::fprintf(stderr,
               "usage: random_diff [--seed N] [--epochs E] [--models N] [--seconds S] [--per-process N]\n"
               "       random_diff --epoch-seed X --models N [--pairs 1] [--list 1]\n"
               "       random_diff --replay X:N[:G],X:N[:G],...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> opt;
  bool is_worker = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--worker") {
      is_worker = true;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      opt[a.substr(2)] = argv[++i];
    } else {
      return usage();
    }
  }
  auto num = [&](const char* key, const char* env, double fallback) {
    if (const char* e = std::getenv(env); e && *e) return std::strtod(e, nullptr);
    return opt.count(key) ? std::strtod(opt[key].c_str(), nullptr) : fallback;
  };
  g_generator = static_cast<int>(num("generator", "", 3));
  if (g_generator < 1 || g_generator > 3) return usage();
  try {
    if (is_worker)
      return worker(std::stoull(opt.at("epoch-seed"), nullptr, 0), std::stoi(opt.at("first")),
                    std::stoi(opt.at("count")), opt.at("dir"));
  } catch (const std::out_of_range&) {
    return usage();
  }
  const int models = static_cast<int>(num("models", "", 32));
  const int per = static_cast<int>(num("per-process", "", 4));
  if (models <= 0 || per <= 0) return usage();
  // The hunt's output is its own lines; the library's warnings about every
  // miss and recompile would bury them.
  ::setenv("NPUCACHE_LOG_LEVEL", "error", 0);
  const auto t0 = std::chrono::steady_clock::now();
  int ran = 0;
  std::map<std::string, int> outcomes;
  if (opt.count("replay")) {
    // Epochs of earlier findings: "SEED:MODELS[:GENERATOR],...".
    const int generator = g_generator;
    std::istringstream list(opt["replay"]);
    for (std::string item; std::getline(list, item, ',');) {
      const auto colon = item.find(':');
      if (colon == std::string::npos) return usage();
      const auto second = item.find(':', colon + 1);
      g_generator = second == std::string::npos ? generator : std::stoi(item.substr(second + 1));
      const std::string models_text =
          item.substr(colon + 1, second == std::string::npos ? std::string::npos : second - colon - 1);
      std::printf("== replaying epoch %s, %s models (generator %d)\n", item.substr(0, colon).c_str(),
                  models_text.c_str(), g_generator);
      if (!epoch(std::stoull(item.substr(0, colon), nullptr, 0), std::stoi(models_text), per, false, 1e30, &ran,
                 &outcomes, t0))
        return 1;
    }
    std::printf("PASS: %d models replayed\n", ran);
    return 0;
  }
  if (opt.count("epoch-seed") && num("list", "", 0) != 0) {  // the models, not run
    const auto plans = plan(std::stoull(opt["epoch-seed"], nullptr, 0), models);
    for (std::size_t i = 0; i < plans.size(); ++i)
      std::printf("model %zu: %s\n  options: %s\n", i, describe(plans[i].program).c_str(),
                  plans[i].options.text().c_str());
    return 0;
  }
  if (opt.count("epoch-seed")) {
    const bool ok = epoch(std::stoull(opt["epoch-seed"], nullptr, 0), models, per, num("pairs", "", 0) != 0, 1e30, &ran,
                          &outcomes, t0);
    std::printf("%s: %d models\n", ok ? "PASS" : "FAIL", ran);
    return ok ? 0 : 1;
  }
  const double seconds = num("seconds", "NPUCACHE_DIFF_SECONDS", 60);
  // A run bounded by time alone when NPUCACHE_DIFF_SECONDS is set.
  const int max_epochs = std::getenv("NPUCACHE_DIFF_SECONDS") ? 1 << 30 : static_cast<int>(num("epochs", "", 1));
  const auto seed = static_cast<std::uint64_t>(num("seed", "NPUCACHE_DIFF_SEED", 1));
  std::printf("random_diff: seed %llu, %d models per epoch, at most %g s\n", static_cast<unsigned long long>(seed),
              models, seconds);
  int epochs = 0;
  for (std::uint64_t e = 0;; ++e) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) break;
    const std::uint64_t es = mix(seed, e);
    std::printf("== epoch %llu (epoch seed %s)\n", static_cast<unsigned long long>(e), hex(es).c_str());
    // Every other epoch runs its processes two at a time.
    if (!epoch(es, models, per, e % 2 == 1, seconds, &ran, &outcomes, t0)) return 1;
    if (++epochs >= max_epochs) break;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string counts;
  for (const auto& [o, n] : outcomes) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + o;
  std::printf("PASS: %d models in %d epoch(s), %.0f s, every cached result equal to eager (calls: %s)\n", ran, epochs,
              took, counts.c_str());
  return 0;
}
