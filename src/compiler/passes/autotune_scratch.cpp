#include "compiler/autotune_scratch.h"

#include <functional>

namespace npucache::compiler {

std::size_t scratch_bytes(const std::vector<runtime::TensorArg>& args) {
  std::size_t n = 0;
  for (const auto& a : args) n += a.bytes();
  return n;
}

namespace {

// Sets one dim (through `set`) to the largest value <= `full` that keeps the
// operands within `budget` (at least 1; a multiple of 64 when above 64, so
// tiles divide it). Bytes are affine in the dim: total(d) = base + d * per.
int64_t fit_dim(std::vector<runtime::TensorArg>& args, int64_t full, std::size_t budget,
                const std::function<void(int64_t)>& set) {
  set(0);
  const std::size_t base = scratch_bytes(args);
  set(1);
  const std::size_t per = scratch_bytes(args) - base;
  int64_t d = full;
  if (per > 0 && base + static_cast<std::size_t>(full) * per > budget)
    d = budget > base ? static_cast<int64_t>((budget - base) / per) : 1;
  if (d > 64) d -= d % 64;
  d = std::max<int64_t>(1, std::min(d, full));
  set(d);
  return d;
}

std::string budget_str(std::size_t budget) {
  return budget % (std::size_t{1} << 20) == 0 ? std::to_string(budget >> 20) + " MiB"
                                              : std::to_string(budget) + " bytes";
}

}  // namespace

ScratchBound bound_matmul(std::vector<runtime::TensorArg>& args, bool trans_b, std::size_t budget) {
  if (scratch_bytes(args) <= budget) return {};
  const std::vector<runtime::TensorArg> original = args;
  auto& a = args[0].dims;
  auto& b = args[1].dims;
  auto& c = args[2].dims;
  std::string note;
  auto say = [&](const std::string& what, int64_t got, int64_t full) {
    if (got != full)
      note += (note.empty() ? "" : ", ") + what + " " + std::to_string(got) + " of " + std::to_string(full);
  };
  // Batch elements repeat the same 2-D kernel: one is the most faithful
  // slice. Then rows, to at most half the budget, so the columns (a
  // weight's rows) keep the other half; then columns; then rows again.
  if (c.size() > 2) {
    int64_t batch = 1;
    for (std::size_t i = 0; i + 2 < c.size(); ++i) batch *= c[i];
    for (auto* dims : {&a, &b, &c})
      for (std::size_t i = 0; i + 2 < dims->size(); ++i) (*dims)[i] = 1;
    say("batch", 1, batch);
  }
  const int64_t M = c[c.size() - 2], N = c.back();
  auto set_m = [&](int64_t m) {
    a[a.size() - 2] = m;
    c[c.size() - 2] = m;
  };
  auto set_n = [&](int64_t n) {
    c.back() = n;
    (trans_b ? b[b.size() - 2] : b.back()) = n;
  };
  int64_t m = M, n = N;
  if (scratch_bytes(args) > budget) {
    set_m(0);
    const std::size_t without_rows = scratch_bytes(args);
    set_m(M);
    m = fit_dim(args, M, without_rows + budget / 2, set_m);
  }
  if (scratch_bytes(args) > budget) n = fit_dim(args, N, budget, set_n);
  if (scratch_bytes(args) > budget) m = fit_dim(args, m, budget, set_m);
  say("M", m, M);
  say("N", n, N);
  if (scratch_bytes(args) > budget) {
    args = original;
    return {false, "not timed: a single row and column of its operands exceed the " + budget_str(budget) +
                       " autotune scratch bound; default tiling kept"};
  }
  return {true, "timed on " + note + " (" + budget_str(budget) + " autotune scratch bound)"};
}

ScratchBound bound_fused(const std::vector<runtime::TensorArg>& args, std::size_t budget) {
  const std::size_t bytes = scratch_bytes(args);
  if (bytes <= budget) return {};
  return {false, "not timed: operands of " + std::to_string(bytes) + " bytes exceed the " + budget_str(budget) +
                     " autotune scratch bound; default block kept"};
}

}  // namespace npucache::compiler
