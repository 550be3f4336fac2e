// A separate process for the cache tests (a warm start is a new process).
//
//   cache_worker run DIR MODEL METHOD [--static] [--ge-cache] [--reduce-overhead]
//                [--batch N] [--code-version V] [--fast] [--scale S] [--rng]
//                [--world W --rank R] [--other] [--no-shared-tuning]
//                [--second-batch N] [--auto] [--extra N]
//     runs the cached method and prints "traced <n>" (how often the method
//     body ran, i.e. was traced), "compiled <n>" (compiles this process
//     did), "status <outcome>", "reason <why it was not a hit>" and
//     "result <values...>". --fast opts into the code_version hit check;
//     --scale multiplies the result by a plain member of the model (a
//     hyper-parameter read from a flag); --world/--rank name the entry as
//     rank R of a W-rank job's layout. Before them it prints "tuning <tuned>
//     <reused>" (the kernels the compile timed and took from the tuning
//     table), "table <n>" (decisions in the process's tuning table) and,
//     when a decision came from the table, "same_program <0|1>": whether
//     the program equals a fresh tuning (table off) given the same choices.
//     --other runs another model ("Other") whose matmuls have the seed's
//     shapes; --no-shared-tuning turns the tuning table off; --pick a|b
//     runs "Picker", whose method uses layer a or b (same shapes);
//     --temperature T runs "Tempered", whose method takes T as a plain
//     double argument (a guard); --long-name N names the model's class
//     with a template-like name of N characters; --candidates N sets the
//     config's autotune_candidates; --constructions N makes the cached
//     method N times in the process (a server building its functions
//     again), running the last; --second-batch N gives the second call
//     another batch; --auto turns automatic dynamic on (dynamic unset);
//     --extra N gives the model a parameter "extra" of N elements the
//     method does not read (another parameter signature, the same graph).
//   cache_worker write DIR PREFIX COUNT BYTES
//     commits COUNT entries named PREFIX<i> with objects of BYTES random
//     bytes each, one transaction per entry (crash and concurrency tests);
//     BYTES 0: copies of the program of the cache's first entry, each
//     under a key of its own (decodable: verify stays clean).
#include <npucache/cache.h>
#include <npucache/models/models.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "compiler/serialize.h"
#include "compiler/tuning_table.h"
#include "format/records.h"
#include "storage/store.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>

using namespace npucache;

namespace {

// The model's class name ("Model", or a long template-like name).
std::string g_type_name = "Model";

struct Counted : models::SeedExample {
  std::string type_name() const override { return g_type_name; }
  int traced = 0;
  double scale = 1.0;
  Tensor prompt(const models::InputMeta& x, const std::vector<Tensor>& kv) {
    ++traced;  // runs only while tracing: never when the program runs
    Tensor y = forward(x, kv);
    return scale == 1.0 ? y : y * scale;
  }
  Tensor noisy(const models::InputMeta& x, const std::vector<Tensor>& kv) {
    ++traced;
    return ops::dropout(forward(x, kv), 0.1);
  }
  // A parameter the method does not read, of `n` elements: another
  // parameter signature (model_info), the same graph.
  void add_extra(int64_t n) { register_parameter("extra", Tensor::from_vector(std::vector<float>(n, 0.0f), {n})); }
};

// Another model with the seed's matmul shapes (a linear of 2 -> 1 on
// [batch, 2]) and another graph.
struct Other : models::SeedExample {
  std::string type_name() const override { return "Other"; }
  int traced = 0;
  Tensor prompt(const models::InputMeta& x, const std::vector<Tensor>& kv) {
    ++traced;
    return ops::tanh(linear1->forward(x.data)) * linear1->forward(kv.at(0));
  }
};

// Two layers of the same shape; a constructor flag picks the one the method
// uses (which parameters a graph reads is part of what it computes).
struct Picker : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  bool use_b;
  int traced = 0;
  explicit Picker(bool pick_b) : use_b(pick_b) {
    a = register_module("a", std::make_shared<nn::Linear>(2, 2));
    b = register_module("b", std::make_shared<nn::Linear>(2, 2));
    a->weight.copy_from({1, 0, 0, 1});
    b->weight.copy_from({0, 2, 3, 0});
  }
  std::string type_name() const override { return "Picker"; }
  Tensor prompt(const models::InputMeta& x, const std::vector<Tensor>& kv) {
    ++traced;
    return (use_b ? b : a)->forward(x.data) + kv.at(0);
  }
};

// A plain floating argument (a temperature): a guard compared bit for bit.
struct Tempered : models::SeedExample {
  std::string type_name() const override { return "Tempered"; }
  int traced = 0;
  double temperature = 1.0;
  Tensor prompt(const models::InputMeta& x, const std::vector<Tensor>& kv, double t) {
    ++traced;
    return forward(x, kv) * t;
  }
};

int g_constructions = 1;

template <class M>
int run_model(M& m, const CacheOptions& o, int64_t batch, bool rng, int64_t second_batch = 0) {
  for (int k = 1; k < g_constructions; ++k) (void)cache_compile(m, &M::prompt, o);
  auto fn = [&] {
    if constexpr (std::is_same_v<M, Counted>) {
      return cache_compile(m, rng ? &M::noisy : &M::prompt, o);
    } else {
      (void)rng;
      return cache_compile(m, &M::prompt, o);
    }
  }();
  std::vector<float> out;
  auto call_inputs = [&] {
    std::vector<float> xs, ks;
    for (int64_t i = 0; i < 2 * batch; ++i) {
      xs.push_back(static_cast<float>(i));
      ks.push_back(0.5f);
    }
    return std::pair{models::InputMeta{Tensor::from_vector(xs, {batch, 2}), true},
                     std::vector<Tensor>{Tensor::from_vector(ks, {batch, 2})}};
  };
  for (int call = 0; call < 2; ++call) {
    if (call == 1 && second_batch > 0) batch = second_batch;
    auto [x, kv] = call_inputs();
    if constexpr (std::is_same_v<M, Tempered>)
      out = fn(x, kv, m.temperature).to_vector();
    else
      out = fn(x, kv).to_vector();
  }
  const int traced = m.traced;
  const std::size_t compiles = fn.compiles();
  const CallStatus status = fn.status();
  // The tuning lines first: the tests compare everything from "result" on.
  const compiler::CompiledGraph& g = detail::entry(fn.engine(), 0);
  std::printf("tuning %d %d\ntable %zu\n", g.kernels_tuned, g.kernels_reused, compiler::TuningTable::process().size());
  if constexpr (std::is_same_v<M, Counted> || std::is_same_v<M, Other>) {
    if (g.kernels_reused > 0) {
      CompileOptions fresh = o.compile;
      fresh.config->shared_tuning = false;
      auto plain = compile(m, &M::prompt, fresh);
      auto [x, kv] = call_inputs();
      plain(x, kv);
      compiler::DeviceProgram p = detail::entry(plain.engine(), 0).program;
      compiler::apply_autotune(p, g.autotune);
      std::printf("same_program %d\n",
                  compiler::serialize_program(p) == compiler::serialize_program(g.program) ? 1 : 0);
    }
  }
  std::printf("traced %d\ncompiled %zu\nstatus %s\nreason %s\nresult", traced, compiles,
              std::string(outcome_name(status.outcome)).c_str(), status.reason.c_str());
  for (float v : out) std::printf(" %g", v);
  std::printf("\n");
  return 0;
}

int run(int argc, char** argv) {
  CacheOptions o;
  o.cache_dir = argv[2];
  o.compile.method_name = argv[4];
  double scale = 1.0;
  int64_t batch = 3, second_batch = 0, extra = 0;
  bool rng = false, other = false;
  std::string pick;
  std::optional<double> temperature;
  CompilerConfig c;
  c.autotune_candidates = 2;
  c.autotune_min_time_us = 0;
  for (int i = 5; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--static")
      o.compile.dynamic = false;
    else if (a == "--ge-cache")
      o.ge_cache = true;
    else if (a == "--reduce-overhead")
      c.mode = CompileMode::reduce_overhead;
    else if (a == "--batch")
      batch = std::stoll(argv[++i]);
    else if (a == "--second-batch")  // the second call's batch
      second_batch = std::stoll(argv[++i]);
    else if (a == "--auto")  // automatic dynamic
      o.compile.dynamic = std::nullopt;
    else if (a == "--extra")
      extra = std::stoll(argv[++i]);
    else if (a == "--code-version")
      o.code_version = argv[++i];
    else if (a == "--fast")
      o.hit_check = HitCheck::code_version;
    else if (a == "--scale")
      scale = std::stod(argv[++i]);
    else if (a == "--world")
      o.world_size = std::stoi(argv[++i]);
    else if (a == "--rank")
      o.global_rank = std::stoi(argv[++i]);
    else if (a == "--rng")
      rng = true;
    else if (a == "--other")
      other = true;
    else if (a == "--no-shared-tuning")
      c.shared_tuning = false;
    else if (a == "--pick")
      pick = argv[++i];
    else if (a == "--candidates")
      c.autotune_candidates = std::stoi(argv[++i]);
    else if (a == "--long-name") {  // "ns::Model<ns::Arg<0>, ...>" of the given length
      const std::size_t n = std::stoul(argv[++i]);
      g_type_name = "ns::Model<";
      for (int k = 0; g_type_name.size() < n; ++k) g_type_name += "ns::Arg<" + std::to_string(k) + ">, ";
      g_type_name.resize(n - 1);
      g_type_name += ">";
    } else if (a == "--temperature")
      temperature = std::stod(argv[++i]);
    else if (a == "--constructions")
      g_constructions = std::stoi(argv[++i]);
  }
  o.compile.config = c;
  if (other) {
    Other m;
    return run_model(m, o, batch, rng);
  }
  if (!pick.empty()) {
    Picker m(pick == "b");
    return run_model(m, o, batch, rng);
  }
  if (temperature) {
    Tempered m;
    m.temperature = *temperature;
    return run_model(m, o, batch, rng);
  }
  Counted m;
  m.scale = scale;
  if (extra > 0) m.add_extra(extra);
  return run_model(m, o, batch, rng, second_batch);
}

// A valid graph key for (prefix, i): 32 hex digits.
std::string key_of(const std::string& prefix, int i) {
  char buf[33];
  const auto h = std::hash<std::string>{}(prefix + std::to_string(i));
  std::snprintf(buf, sizeof buf, "%016zx%016zx", h, static_cast<std::size_t>(h * 0x9e3779b97f4a7c15ull));
  return buf;
}

int write(char** argv) {
  const storage::Store store = storage::Store::open(argv[2], storage::Create::yes);
  const std::string prefix = argv[3];
  const int count = std::stoi(argv[4]);
  const std::size_t bytes = std::stoull(argv[5]);
  std::mt19937_64 rng(std::hash<std::string>{}(prefix));
  // BYTES 0: every object is a copy of the program of the store's first
  // entry (decodable, so a verify of the cache is clean), under a key of
  // its own.
  std::optional<storage::ObjectRecord> program;
  std::vector<std::string> parameters;
  if (bytes == 0) {
    for (const auto& m : store.model_infos())
      if (auto d = store.index(m); d && !d->index.entries.empty() && !program) {
        program = store.object(d->index.entries.front().graph_key, true);
        parameters = d->index.entries.front().parameters;
      }
    if (!program) throw std::runtime_error("write with BYTES 0 needs a cache with an entry to copy");
  }
  for (int i = 0; i < count; ++i) {
    storage::ObjectRecord o;
    if (program) {
      o = *program;
    } else {
      o.raw.resize(bytes);
      for (auto& ch : o.raw) ch = static_cast<char>(rng() % 7);  // compressible, not trivially
      o.meta.raw_size = o.raw.size();
      o.meta.checksum = storage::checksum(o.raw);  // made with the record, as make_object does
    }
    o.graph_key = key_of(prefix, i);
    o.graph_text = {"graph " + o.graph_key};
    storage::EntryRecord e;
    e.parameters = parameters;
    e.path = "Worker_dynamic_0/" + prefix + std::to_string(i);
    e.graph_key = o.graph_key;
    e.meta.name = e.path;
    e.meta.model_info = "Worker_dynamic_0";
    e.meta.components["runtime_version"] = "any";
    const storage::Writing held = store.writing();
    e.object_checksum = store.put_object(o, held).stored.meta.checksum;
    store.update_index("Worker_dynamic_0", {{"model_class", "Worker"}}, {e}, {}, held);
    std::printf("committed %d\n", i);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 5 && std::strcmp(argv[1], "run") == 0) return run(argc, argv);
    if (argc == 6 && std::strcmp(argv[1], "write") == 0) return write(argv);
    std::fprintf(stderr, "usage: cache_worker run DIR MODEL METHOD [opts] | write DIR PREFIX COUNT BYTES\n");
    return 2;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 3;
  }
}
