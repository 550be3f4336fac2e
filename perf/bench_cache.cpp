// Cold vs warm time-to-ready of tiny-llama prompt + decode through
// cache_compile, each start in a new process, cold and warm alternated in
// one run:
//  1. both model sizes, max-autotune + ge_cache: cold, warm with the
//     verifying trace (the default hit check), warm on the code_version
//     fast path; the trace's share of the verified warm start; the warm
//     load path (lookup, read, decode, bind: the first call without the
//     trace) against its floor (read + zstd-decompress + deserialize of the
//     same objects, measured in the same process); compression.
//  2. every option combination (mode, dynamic, ge_cache, hit check) on the
//     small model: warm never slower than cold.
//
//   bench_cache [trials]            (runs itself as the child processes)
#include <npucache/cache.h>
#include <npucache/device.h>
#include <npucache/models/models.h>

#include "compiler/engine.h"
#include "compiler/serialize.h"
#include "harness.h"
#include "storage/store.h"

#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string size = "small", mode = "max-autotune";
  bool dynamic = true, ge_cache = true, fast = false;
  std::string args() const {
    return size + " " + mode + " " + (dynamic ? "1" : "0") + " " + (ge_cache ? "1" : "0") + " " + (fast ? "1" : "0");
  }
  std::string label() const {
    return mode + (dynamic ? " dynamic" : " static") + (ge_cache ? " ge_cache" : "") + (fast ? " fast" : " verified");
  }
};

struct Result {
  double ready = 0;  // model built -> both methods ran once
  double trace = 0;  // tracing both methods (what the verifying check adds)
  double first = 0;  // the engines' first calls (lookup ... bind, incl. the trace)
  double floor = 0;  // read + decompress + deserialize of the stored objects
  std::size_t raw = 0, stored = 0;
};

int child(const std::string& dir, int argc, char** argv) {
  Options opt;
  opt.size = argv[3];
  opt.mode = argv[4];
  opt.dynamic = std::strcmp(argv[5], "1") == 0;
  opt.ge_cache = std::strcmp(argv[6], "1") == 0;
  opt.fast = std::strcmp(argv[7], "1") == 0;
  (void)argc;
  models::TinyLlama m(opt.size == "large" ? models::TinyLlamaConfig::large() : models::TinyLlamaConfig{}, {});
  CacheOptions o;
  o.cache_dir = dir;
  o.ge_cache = opt.ge_cache;
  CompilerConfig c;
  c.mode = parse_compile_mode(opt.mode);
  o.compile.config = c;
  o.compile.dynamic = opt.dynamic;
  if (opt.fast) {
    o.hit_check = HitCheck::code_version;
    o.code_version = "bench";
  }
  std::vector<int64_t> toks{1, 2, 3, 4, 5, 6, 7, 8}, pos{0, 1, 2, 3, 4, 5, 6, 7};
  const Tensor t8 = Tensor::from_vector_i64(toks, {1, 8}), p8 = Tensor::from_vector_i64(pos, {1, 8});
  const Tensor t1 = Tensor::from_vector_i64({9}, {1, 1}), p1 = Tensor::from_vector_i64({8}, {1, 1});
  const double built = perf::now_s();
  auto prompt = cache_compile(m, &models::TinyLlama::prompt, o);
  auto decode = cache_compile(m, &models::TinyLlama::decode, o);
  auto kv = m.make_kv_cache(1);
  prompt(t8, p8, kv);
  decode(t1, p1, kv).to_vector();
  Result r;
  r.ready = perf::now_s() - built;
  r.first = detail::first_call_seconds(prompt.engine()) + detail::first_call_seconds(decode.engine());
  // The trace the verifying check runs, timed alone (same calls, same work).
  {
    auto scratch = m.make_kv_cache(1);
    TraceOptions to;
    to.dynamic = opt.dynamic;
    const double t0 = perf::now_s();
    to.method_name = "prompt";
    trace_method(m, &models::TinyLlama::prompt, to, t8, p8, scratch);
    to.method_name = "decode";
    trace_method(m, &models::TinyLlama::decode, to, t1, p1, scratch);
    r.trace = perf::now_s() - t0;
  }
  // Floor: the same bytes read (HDF5, zstd filter, checksum) and
  // deserialized, nothing else.
  {
    const double f0 = perf::now_s();
    const storage::Store store = storage::Store::open(dir, storage::Create::no);
    const auto keys = store.object_keys();
    for (const auto& k : keys) compiler::deserialize_compiled(store.object(k, false).raw);
    r.floor = perf::now_s() - f0;
    for (const auto& k : keys) {
      const auto meta = store.object_meta(k);
      r.raw += meta.raw_size;
      r.stored += meta.stored_size;
    }
  }
  std::printf("%.6f %.6f %.6f %.6f %zu %zu\n", r.ready, r.trace, r.first, r.floor, r.raw, r.stored);
  return 0;
}

Result spawn(const char* self, const std::string& dir, const Options& opt) {
  int fds[2];
  if (::pipe(fds) != 0) std::exit(1);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::setenv("NPUCACHE_LOG_LEVEL", "warn", 1);
    const std::string cmd = std::string(self) + " child " + dir + " " + opt.args();
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[256] = {0};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Result r{};
  if (n <= 0 ||
      std::sscanf(buf, "%lf %lf %lf %lf %zu %zu", &r.ready, &r.trace, &r.first, &r.floor, &r.raw, &r.stored) != 6) {
    std::fprintf(stderr, "child failed: %s\n", opt.label().c_str());
    std::exit(1);
  }
  return r;
}

// Cold then warm, `trials` times alternated; medians.
struct Pair {
  Result cold, warm;
};
Pair measure(const char* self, const std::string& dir, const Options& opt, int trials) {
  std::vector<double> cr, wr, wt, wf, wl;
  Pair last;
  for (int t = 0; t < trials; ++t) {
    fs::remove_all(dir);
    last.cold = spawn(self, dir, opt);
    last.warm = spawn(self, dir, opt);
    cr.push_back(last.cold.ready);
    wr.push_back(last.warm.ready);
    wt.push_back(last.warm.trace);
    wf.push_back(last.warm.first);
    wl.push_back(last.warm.floor);
  }
  fs::remove_all(dir);
  last.cold.ready = perf::median(cr);
  last.warm.ready = perf::median(wr);
  last.warm.trace = perf::median(wt);
  last.warm.first = perf::median(wf);
  last.warm.floor = perf::median(wl);
  return last;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 8 && std::string(argv[1]) == "child") return child(argv[2], argc, argv);
  const int trials = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string dir = (fs::temp_directory_path() / ("npucache-bench-" + std::to_string(::getpid()))).string();
  std::printf(
      "tiny-llama prompt+decode through cache_compile, a new process per start, median of %d alternated "
      "trials\n",
      trials);
  for (const char* size : {"small", "large"}) {
    Options verified;
    verified.size = size;
    Options fast = verified;
    fast.fast = true;
    const Pair v = measure(argv[0], dir, verified, trials);
    const Pair f = measure(argv[0], dir, fast, trials);
    const double load = v.warm.first - v.warm.trace;
    std::printf("\n%s model, max-autotune + ge_cache\n", size);
    std::printf("  cold time-to-ready (trace, compile, save, run)     %9.2f ms\n", v.cold.ready * 1e3);
    std::printf("  warm time-to-ready, verified (trace, load, run)    %9.2f ms   cold/warm %6.1fx  (goal >= 20x)\n",
                v.warm.ready * 1e3, v.cold.ready / v.warm.ready);
    std::printf("  warm time-to-ready, code_version fast path         %9.2f ms   cold/warm %6.1fx\n",
                f.warm.ready * 1e3, f.cold.ready / f.warm.ready);
    std::printf("  trace share of the verified warm start             %9.1f %%   (goal <= 25%%)\n",
                100.0 * v.warm.trace / v.warm.ready);
    std::printf("  warm load path (lookup, read, decode, bind)        %9.2f ms\n", load * 1e3);
    std::printf("  floor (read + zstd-decompress + deserialize)       %9.2f ms   load/floor %5.2fx  (goal <= 2x)\n",
                v.warm.floor * 1e3, load / v.warm.floor);
    std::printf("  compression: %zu raw bytes stored in %zu (%.2fx)\n", v.warm.raw, v.warm.stored,
                static_cast<double>(v.warm.raw) / static_cast<double>(v.warm.stored));
  }
  std::printf("\nwarm never slower than cold: every option combination, small model\n");
  std::printf("  %-44s %10s %10s %8s\n", "options", "cold ms", "warm ms", "cold/warm");
  int slower = 0;
  for (const char* mode : {"max-autotune", "reduce-overhead"})
    for (bool dynamic : {true, false})
      for (bool ge : {false, true})
        for (bool fast : {false, true}) {
          Options o;
          o.mode = mode;
          o.dynamic = dynamic;
          o.ge_cache = ge;
          o.fast = fast;
          const Pair p = measure(argv[0], dir, o, trials);
          slower += p.warm.ready >= p.cold.ready;
          std::printf("  %-44s %10.2f %10.2f %8.1fx\n", o.label().c_str(), p.cold.ready * 1e3, p.warm.ready * 1e3,
                      p.cold.ready / p.warm.ready);
        }
  std::printf("  combinations where warm was not faster: %d of 16  (goal 0)\n", slower);
  return 0;
}
