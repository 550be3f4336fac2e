#include "compiler/autotune.h"
#include "compiler/autotune_scratch.h"
#include "compiler/tuning_table.h"
#include "log/progress.h"

#include <npucache/device.h>
#include <npucache/error.h>

#include "runtime/launch.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <map>

namespace npucache::compiler {
namespace {

using Config = std::vector<std::pair<std::string, int64_t>>;

// Candidate tilings, the untuned default first. Never destroyed: a thread
// may still be compiling while another runs exit().
const std::vector<Config>& matmul_candidates() {
  static const auto& c = *new std::vector<Config>{
      {{"tile_m", 32}, {"tile_n", 256}, {"tile_k", 128}},  {{"tile_m", 16}, {"tile_n", 128}, {"tile_k", 64}},
      {{"tile_m", 64}, {"tile_n", 256}, {"tile_k", 64}},   {{"tile_m", 8}, {"tile_n", 64}, {"tile_k", 256}},
      {{"tile_m", 32}, {"tile_n", 512}, {"tile_k", 32}},   {{"tile_m", 4}, {"tile_n", 1024}, {"tile_k", 128}},
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 128}}, {{"tile_m", 16}, {"tile_n", 64}, {"tile_k", 512}},
      {{"tile_m", 2}, {"tile_n", 256}, {"tile_k", 1024}},  {{"tile_m", 0}, {"tile_n", 0}, {"tile_k", 0}},
  };
  return c;
}

const std::vector<Config>& fused_candidates() {
  static const auto& c = *new std::vector<Config>{
      {{"block", 1024}}, {{"block", 256}},  {{"block", 512}}, {{"block", 2048}},
      {{"block", 4096}}, {{"block", 8192}}, {{"block", 128}}, {{"block", 16384}},
  };
  return c;
}

std::string config_str(const Config& c) {
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

// Best of `reps` measurements; each runs the kernel back to back for at
// least `min_us` (after one warm-up run) and reports the mean per run, so
// microsecond kernels are timed above the clock's resolution.
double time_us(const runtime::KernelLaunch& l, int reps, int min_us) {
  using Clock = std::chrono::steady_clock;
  runtime::run_kernel(l);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    int runs = 0;
    double us = 0;
    do {
      runtime::run_kernel(l);
      ++runs;
      us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    } while (us < min_us);
    best = std::min(best, us / runs);
  }
  return best;
}

// The candidate `chosen` names among the first `n`, or -1.
int candidate_index(const std::vector<Config>& cands, std::size_t n, const std::string& chosen) {
  for (std::size_t c = 0; c < n && c < cands.size(); ++c)
    if (config_str(cands[c]) == chosen) return static_cast<int>(c);
  return -1;
}

}  // namespace

std::vector<AutotuneDecision> autotune(DeviceProgram& p, const SymBindings& example, const CompilerConfig& config,
                                       int device) {
  std::vector<AutotuneDecision> decisions;
  std::map<std::string, std::size_t> by_key;
  Device& dev = Platform::get().device(device);
  const std::string runtime = config.shared_tuning ? tuning_runtime(device) : std::string();
  TuningTable& table = TuningTable::process();
  for (std::size_t si = 0; si < p.steps.size(); ++si) {
    ProgramStep& s = p.steps[si];
    if (s.op != Op::matmul && s.op != Op::fused) continue;
    std::vector<runtime::TensorArg> args;
    std::string key(op_name(s.op));
    for (int b : s.operands) {
      const TensorType& t = p.buffers[static_cast<std::size_t>(b)].type;
      args.push_back({nullptr, 0, t.dtype, evaluate_dims(t.shape, example)});
      key += " " + type_str({t.dtype, shape_of(args.back().dims)});
    }
    const TensorType& rt = p.buffers[static_cast<std::size_t>(s.result)].type;
    args.push_back({nullptr, 0, rt.dtype, evaluate_dims(rt.shape, example)});
    if (s.op == Op::matmul && s.attrs.get_bool_or("trans_b", false)) key += " trans_b";
    if (s.op == Op::fused)
      key += " code#" + std::to_string(std::hash<std::string>{}(attr_str(s.attrs.get<std::vector<int64_t>>("code"))));
    auto found = by_key.find(key);
    if (found == by_key.end()) {
      Attrs base = evaluate_attrs(s.attrs, example);
      AutotuneDecision d;
      d.key = key;
      const ScratchBound bound = s.op == Op::matmul
                                     ? bound_matmul(args, base.get_bool_or("trans_b", false), kAutotuneScratchBytes)
                                     : bound_fused(args, kAutotuneScratchBytes);
      d.timed_on = bound.note;
      const bool timed = bound.timed;
      const auto& cands = s.op == Op::matmul ? matmul_candidates() : fused_candidates();
      const std::size_t n =
          timed ? std::min<std::size_t>(cands.size(), static_cast<std::size_t>(config.autotune_candidates)) : 0;
      // A decision of the tuning table that compared at least these
      // candidates and names one of the known ones: applied, not timed.
      if (config.shared_tuning)
        if (auto e = table.find(runtime, key); e && static_cast<std::size_t>(std::max(e->candidates, 0)) >= n) {
          const int c =
              candidate_index(cands, std::max<std::size_t>(static_cast<std::size_t>(e->candidates), 1), e->chosen);
          if (c >= 0) {
            d.chosen = e->chosen;
            d.best_us = e->best_us;
            d.default_us = e->default_us;
            d.candidates = e->candidates;
            d.timed_on = e->timed_on;
            d.from_table = true;
            found = by_key.emplace(key, decisions.size()).first;
            decisions.push_back(std::move(d));
            for (const auto& [k, v] : cands[static_cast<std::size_t>(c)]) s.attrs.set(k, v);
            decisions[found->second].steps.push_back(static_cast<int>(si));
            continue;
          }
        }
      // Scratch operands with benign values (no NaN/inf on any candidate).
      if (timed)
        for (auto& a : args) {
          a.block = dev.allocate(std::max<std::size_t>(a.bytes(), 1));
          std::memset(a.block->data(), 0, a.block->size());
        }
      d.candidates = static_cast<int>(n);
      double best = std::numeric_limits<double>::infinity();
      std::size_t best_i = 0;
      for (std::size_t c = 0; c < n; ++c) {
        Attrs a = base;
        for (const auto& [k, v] : cands[c]) a.set(k, v);
        runtime::KernelLaunch l;
        l.op = s.op;
        l.attrs = std::make_shared<const Attrs>(std::move(a));
        l.args = args;
        const double us = time_us(l, config.autotune_repetitions, config.autotune_min_time_us);
        if (c == 0) d.default_us = us;
        if (us < best) {
          best = us;
          best_i = c;
        }
      }
      // The scratch goes back to the host before the next kernel's.
      for (auto& a : args) a.block.reset();
      if (timed) dev.empty_cache();
      d.best_us = n > 0 ? best : 0.0;
      d.chosen = config_str(cands[best_i]);
      if (config.shared_tuning) table.add(runtime, key, tuning_entry(d));
      found = by_key.emplace(key, decisions.size()).first;
      decisions.push_back(std::move(d));
      log::Progress::note("pass autotune, " + std::to_string(decisions.size()) + " kernels tuned");
      for (const auto& [k, v] : cands[best_i]) s.attrs.set(k, v);
    } else {
      const auto& cands = s.op == Op::matmul ? matmul_candidates() : fused_candidates();
      for (const auto& c : cands)
        if (config_str(c) == decisions[found->second].chosen)
          for (const auto& [k, v] : c) s.attrs.set(k, v);
    }
    decisions[found->second].steps.push_back(static_cast<int>(si));
  }
  return decisions;
}

void apply_autotune(DeviceProgram& p, const std::vector<AutotuneDecision>& decisions) {
  for (const auto& d : decisions) {
    Config chosen;
    std::size_t at = 0;
    while (at < d.chosen.size()) {
      std::size_t end = d.chosen.find(' ', at);
      if (end == std::string::npos) end = d.chosen.size();
      const std::string kv = d.chosen.substr(at, end - at);
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw VerifyError("autotune decision '" + d.chosen + "' is malformed");
      chosen.emplace_back(kv.substr(0, eq), std::stoll(kv.substr(eq + 1)));
      at = end + 1;
    }
    for (int si : d.steps) {
      if (si < 0 || static_cast<std::size_t>(si) >= p.steps.size() ||
          (p.steps[static_cast<std::size_t>(si)].op != Op::matmul &&
           p.steps[static_cast<std::size_t>(si)].op != Op::fused))
        throw VerifyError("autotune decision for '" + d.key + "' names step " + std::to_string(si) +
                          ", which is no tunable kernel of the program");
      for (const auto& [k, v] : chosen) p.steps[static_cast<std::size_t>(si)].attrs.set(k, v);
    }
  }
}

}  // namespace npucache::compiler
