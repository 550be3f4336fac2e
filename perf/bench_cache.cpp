// Cold vs warm time-to-ready of tiny-llama prompt + decode through
// cache_compile (max-autotune, ge_cache), each in a new process, alternated
// in one run; the warm load path against its floor (read the stored bytes,
// zstd-decompress, deserialize) measured in the warm process; and the
// compression ratio of the stored artifacts.
//
//   bench_cache [trials]            (runs itself as the child processes)
#include <npucache/cache.h>
#include <npucache/device.h>
#include <npucache/models/models.h>

#include "cache/store.h"
#include "compiler/engine.h"
#include "compiler/serialize.h"
#include "harness.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

int child(const std::string& dir) {
  const double t0 = perf::now_s();
  models::TinyLlama m({}, {});
  const double built = perf::now_s();
  CacheOptions o;
  o.cache_dir = dir;
  o.ge_cache = true;
  o.compile.method_name = "prompt";
  auto prompt = cache_compile(m, &models::TinyLlama::prompt, o);
  o.compile.method_name = "decode";
  auto decode = cache_compile(m, &models::TinyLlama::decode, o);
  auto kv = m.make_kv_cache(1);
  std::vector<int64_t> toks{1, 2, 3, 4, 5, 6, 7, 8}, pos{0, 1, 2, 3, 4, 5, 6, 7};
  prompt(Tensor::from_vector_i64(toks, {1, 8}), Tensor::from_vector_i64(pos, {1, 8}), kv);
  decode(Tensor::from_vector_i64({9}, {1, 1}), Tensor::from_vector_i64({8}, {1, 1}), kv).to_vector();
  const double ready = perf::now_s();
  // Floor: the same bytes read, decompressed (HDF5 zstd filter, checksum)
  // and deserialized, nothing else.
  double floor = 0;
  std::size_t raw = 0, stored = 0;
  {
    const double f0 = perf::now_s();
    cache::Hdf5Store store(dir);
    auto r = store.reader();
    for (const auto& e : r->entries()) {
      auto obj = r->object(e.graph_key, false);
      compiler::deserialize_compiled(obj.raw);
    }
    floor = perf::now_s() - f0;
    for (const auto& k : r->objects()) {
      raw += r->object(k).raw.size();
      stored += r->stored_bytes(k);
    }
  }
  std::printf("%.6f %.6f %.6f %zu %zu\n", ready - built,
              detail::first_call_seconds(prompt.engine()) + detail::first_call_seconds(decode.engine()), floor, raw, stored);
  (void)t0;
  return 0;
}

struct Result {
  double ready, load, floor;
  std::size_t raw, stored;
};

Result spawn(const char* self, const std::string& dir) {
  int fds[2];
  if (::pipe(fds) != 0) std::exit(1);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::setenv("NPUCACHE_LOG_LEVEL", "warn", 1);
    ::execl(self, self, "child", dir.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[256] = {0};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Result r{};
  if (n <= 0 || std::sscanf(buf, "%lf %lf %lf %zu %zu", &r.ready, &r.load, &r.floor, &r.raw, &r.stored) != 5) {
    std::fprintf(stderr, "child failed\n");
    std::exit(1);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "child") return child(argv[2]);
  const int trials = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string dir = (fs::temp_directory_path() / ("npucache-bench-" + std::to_string(::getpid()))).string();
  std::vector<double> cold, warm, load, floor;
  Result last{};
  for (int t = 0; t < trials; ++t) {
    fs::remove_all(dir);
    Result c = spawn(argv[0], dir);
    Result w = spawn(argv[0], dir);
    cold.push_back(c.ready);
    warm.push_back(w.ready);
    load.push_back(w.load);
    floor.push_back(w.floor);
    last = w;
  }
  fs::remove_all(dir);
  const double mc = perf::median(cold), mw = perf::median(warm), ml = perf::median(load), mf = perf::median(floor);
  std::printf("tiny-llama prompt+decode, max-autotune + ge_cache, new process each, median of %d alternated trials\n",
              trials);
  std::printf("  cold time-to-ready (trace, compile, save, run)   %9.2f ms\n", mc * 1e3);
  std::printf("  warm time-to-ready (load, run)                   %9.2f ms\n", mw * 1e3);
  std::printf("  ratio cold/warm                                  %9.1fx  (goal >= 20x)\n", mc / mw);
  std::printf("  warm load path (lookup, read, decode, bind)      %9.2f ms\n", ml * 1e3);
  std::printf("  floor (read + zstd-decompress + deserialize)     %9.2f ms\n", mf * 1e3);
  std::printf("  ratio load/floor                                 %9.2fx  (goal <= 2x)\n", ml / mf);
  std::printf("  compression: %zu raw bytes stored in %zu (%.2fx)\n", last.raw, last.stored,
              static_cast<double>(last.raw) / static_cast<double>(last.stored));
  return 0;
}
