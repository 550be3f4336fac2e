// Captured graphs in the cache: time-to-ready of a reduce-overhead start of
// tiny-llama (prompt at 24 lengths, each a capture, and decode), each start
// a new process, measured side by side in one run:
//   cold       compile, capture every shape, save programs and templates;
//   recapture  the programs cached, their templates removed: load, capture;
//   warm       programs and templates cached: load, restore (no capture);
//   floor      in the warm process: reading and decoding the programs and
//              templates and instantiating the graphs, nothing else.
// Each without and with the simulator's capture-cost model
// (NPUCACHE_SIM_CAPTURE_US_PER_TASK=3300, _INSTANTIATE_US_PER_TASK=165:
// about 3.3 s to capture a 1,000-task graph, as vllm-ascend reports per
// shape, and 20x faster to instantiate, as Foundry restores).
//
//   bench_templates [trials]          (runs itself as the child processes)
#include <npucache/cache.h>
#include <npucache/device.h>
#include <npucache/models/models.h>

#include "compiler/capture_template.h"
#include "compiler/serialize.h"
#include "format/template_file.h"
#include "harness.h"
#include "runtime/stream.h"
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

constexpr int kShapes = 24;

struct Result {
  double ready = 0, floor = 0;
  std::size_t recorded = 0, restored = 0, tasks = 0;
};

// One start: prepares prompt at kShapes lengths and decode (no run: what a
// server does before it takes requests), then, warm, the floor.
int child(const std::string& dir) {
  models::Decoder m(models::DecoderConfig{}, {});
  auto kv = m.make_kv_cache(1);
  CacheOptions o;
  o.cache_dir = dir;
  o.compile.config = CompilerConfig{};
  o.compile.config->mode = CompileMode::reduce_overhead;
  const double t0 = perf::now_s();
  auto prompt = cache_compile(m, &models::Decoder::prompt, o);
  auto decode = cache_compile(m, &models::Decoder::decode, o);
  std::size_t recorded = 0, restored = 0;
  for (int s = 2; s < 2 + kShapes; ++s) {  // sizes >= 2: one dynamic program
    std::vector<int64_t> toks(static_cast<std::size_t>(s), 5), pos(static_cast<std::size_t>(s));
    for (int i = 0; i < s; ++i) pos[static_cast<std::size_t>(i)] = i;
    prompt.prepare(Tensor::from_vector_i64(toks, {1, s}), Tensor::from_vector_i64(pos, {1, s}), kv);
  }
  decode.prepare(Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({3}, {1, 1}), kv);
  const double ready = perf::now_s() - t0;
  for (const CallStatus* s : {&prompt.status(), &decode.status()}) {
    recorded += s->recorded;
    restored += s->restored;
  }
  // The floor: read and decode every object and template, instantiate
  // every graph (the modelled instantiation cost included).
  const double f0 = perf::now_s();
  std::size_t tasks = 0;
  const storage::Store store = storage::Store::open(dir, storage::Create::no);
  for (const auto& key : store.object_keys()) (void)compiler::deserialize_compiled(store.object(key, false).raw);
  if (fs::exists(fs::path(dir) / "templates"))
    for (const auto& f : fs::directory_iterator(fs::path(dir) / "templates")) {
      const std::string name = f.path().filename().string();
      const auto bytes = store.directory().sub("templates", storage::Create::no).read(name, std::size_t{1} << 30);
      const auto t = compiler::decode_template(storage::decode_template_file(*bytes, name).bytes);
      std::vector<runtime::KernelLaunch> launches(t.tasks.size());
      tasks += t.tasks.size();
      (void)runtime::TaskGraph::from_launches(std::move(launches));
    }
  const double floor = perf::now_s() - f0;
  std::printf("RESULT %.6f %.6f %zu %zu %zu\n", ready, floor, recorded, restored, tasks);
  return 0;
}

Result run(const char* self, const std::string& dir, bool cost_model) {
  const std::string env = cost_model ? "NPUCACHE_SIM_CAPTURE_US_PER_TASK=3300 NPUCACHE_SIM_INSTANTIATE_US_PER_TASK=165 "
                                     : "NPUCACHE_SIM_CAPTURE_US_PER_TASK=0 NPUCACHE_SIM_INSTANTIATE_US_PER_TASK=0 ";
  const std::string cmd = env + "NPUCACHE_LOG_LEVEL=warn " + self + " child " + dir;
  FILE* p = ::popen(cmd.c_str(), "r");
  Result r;
  char line[512];
  while (p && std::fgets(line, sizeof line, p))
    if (std::strncmp(line, "RESULT ", 7) == 0)
      std::sscanf(line + 7, "%lf %lf %zu %zu %zu", &r.ready, &r.floor, &r.recorded, &r.restored, &r.tasks);
  if (p) ::pclose(p);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "child") == 0) return child(argv[2]);
  const int trials = argc > 1 ? std::atoi(argv[1]) : 3;
  const fs::path root = fs::temp_directory_path() / ("npucache-bench-templates-" + std::to_string(::getpid()));
  std::printf(
      "reduce-overhead start of tiny-llama: prompt at %d lengths + decode (%d captures), new processes,\n"
      "medians of %d trials\n",
      kShapes, kShapes + 1, trials);
  for (bool model : {false, true}) {
    std::vector<double> cold, recap, warm, floor;
    Result last_warm, last_cold;
    for (int t = 0; t < trials; ++t) {
      const std::string dir = (root / "c").string();
      fs::remove_all(root);
      last_cold = run(argv[0], dir, model);
      cold.push_back(last_cold.ready);
      fs::remove_all(fs::path(dir) / "templates");
      recap.push_back(run(argv[0], dir, model).ready);
      last_warm = run(argv[0], dir, model);
      warm.push_back(last_warm.ready);
      floor.push_back(last_warm.floor);
    }
    fs::remove_all(root);
    const double c = perf::median(cold), r = perf::median(recap), w = perf::median(warm), f = perf::median(floor);
    std::printf("%s capture-cost model:\n", model ? "with the" : "without the");
    std::printf("  cold (compile + capture)      %9.1f ms  (%zu captures recorded)\n", c * 1e3, last_cold.recorded);
    std::printf("  programs cached, recapture    %9.1f ms\n", r * 1e3);
    std::printf("  warm (restore templates)      %9.1f ms  (%zu recorded, %zu restored, %zu tasks)\n", w * 1e3,
                last_warm.recorded, last_warm.restored, last_warm.tasks);
    std::printf("  floor (read, decode, instantiate) %5.1f ms\n", f * 1e3);
    std::printf("  warm vs cold                  %9.1fx  (goal >= 20x with the model)\n", c / w);
    std::printf("  restore vs recapture          %9.1fx  (goal >= 10x with the model)\n", r / w);
    std::printf("  warm / floor                  %9.2fx  (goal <= 1.5x)\n", w / f);
  }
  return 0;
}
