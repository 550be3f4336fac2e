// Greedy generation over the ranks of a tp x pp job.
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/ops.h>

#include <chrono>

namespace npucache::models {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t argmax_row(const std::vector<float>& v, std::size_t from, std::size_t n) {
  std::size_t best = from;
  for (std::size_t i = from; i < from + n; ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int64_t>(best - from);
}

}  // namespace

GenerationResult greedy_generate(Decoder& model, const std::vector<int64_t>& prompt, int new_tokens, Communicator& comm,
                                 StepFn prompt_fn, StepFn decode_fn) {
  const auto& cfg = model.config();
  if (prompt.empty()) throw ConfigError("greedy_generate needs a non-empty prompt");
  if (new_tokens < 1) throw ConfigError("greedy_generate needs new_tokens >= 1");
  if (static_cast<int64_t>(prompt.size()) + new_tokens > cfg.max_seq)
    throw ConfigError("prompt (" + std::to_string(prompt.size()) + ") + new tokens (" + std::to_string(new_tokens) +
                      ") exceed the model's max_seq " + std::to_string(cfg.max_seq));
  if (!prompt_fn)
    prompt_fn = [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return model.prompt(t, p, kv); };
  if (!decode_fn)
    decode_fn = [&](const Tensor& t, const Tensor& p, const std::vector<Tensor>& kv) { return model.decode(t, p, kv); };

  Communicator* previous = &current_communicator();
  set_current_communicator(&comm);
  struct Restore {
    Communicator* c;
    ~Restore() { set_current_communicator(c); }
  } restore{previous};

  GenerationResult r;
  const auto S = static_cast<int64_t>(prompt.size());
  const int last = model.ranks().pp - 1;
  std::vector<Tensor> kv = model.make_kv_cache(1);
  Device& device = Platform::get().device(current_device());

  // One step: run, pick the next token on the last stage, share it.
  auto step = [&](const StepFn& fn, const Tensor& tokens, const Tensor& positions, int64_t len) {
    Tensor out = fn(tokens, positions, kv);
    device.synchronize();  // no stream work in flight while the host talks MPI
    int64_t next = 0;
    if (model.last_stage()) {
      std::vector<float> logits = out.to_vector();
      const auto V = static_cast<std::size_t>(cfg.vocab);
      const std::size_t row = static_cast<std::size_t>(len - 1) * V;
      r.logits.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(row),
                            logits.begin() + static_cast<std::ptrdiff_t>(row + V));
      next = argmax_row(logits, row, V);
    }
    comm.broadcast(GroupRole::pp, last, &next, sizeof next);
    return next;
  };

  auto t0 = Clock::now();
  std::vector<int64_t> pos(static_cast<std::size_t>(S));
  for (int64_t i = 0; i < S; ++i) pos[static_cast<std::size_t>(i)] = i;
  int64_t tok = step(prompt_fn, Tensor::from_vector_i64(prompt, {1, S}), Tensor::from_vector_i64(pos, {1, S}), S);
  r.time_to_first_token_s = since(t0);
  r.tokens.push_back(tok);
  for (int i = 1; i < new_tokens; ++i) {
    auto t = Clock::now();
    const int64_t p = S + i - 1;
    tok = step(decode_fn, Tensor::from_vector_i64({tok}, {1, 1}), Tensor::from_vector_i64({p}, {1, 1}), 1);
    r.token_latency_s.push_back(since(t));
    r.tokens.push_back(tok);
  }
  return r;
}

}  // namespace npucache::models
