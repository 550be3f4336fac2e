#include "compiler/memory_plan.h"

#include <algorithm>

namespace npucache::compiler {
namespace {
constexpr std::size_t kAlign = 64;  // cache-line aligned offsets
std::size_t align(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

HappensBefore::HappensBefore(const DeviceProgram& p)
    : words_((p.steps.size() + 63) / 64), bits_(p.steps.size() * words_, 0) {
  std::vector<int> last_on_stream(static_cast<std::size_t>(std::max(1, p.num_streams)), -1);
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    uint64_t* row = &bits_[s * words_];
    std::vector<int> preds = p.steps[s].deps;
    int& prev = last_on_stream.at(static_cast<std::size_t>(p.steps[s].stream));
    if (prev >= 0) preds.push_back(prev);
    prev = static_cast<int>(s);
    for (int d : preds) {
      const uint64_t* drow = &bits_[static_cast<std::size_t>(d) * words_];
      for (std::size_t w = 0; w < words_; ++w) row[w] |= drow[w];
      row[static_cast<std::size_t>(d) / 64] |= uint64_t{1} << (d % 64);
    }
  }
}

bool HappensBefore::before(int a, int b) const {
  return (bits_[static_cast<std::size_t>(b) * words_ + static_cast<std::size_t>(a) / 64] >> (a % 64)) & 1u;
}

MemoryPlan plan_memory(const DeviceProgram& p, const HappensBefore& hb, const std::vector<std::size_t>& bytes) {
  MemoryPlan plan;
  plan.offsets.assign(p.buffers.size(), -1);
  // Steps touching each arena root; the first one writes it.
  std::vector<std::vector<int>> access(p.buffers.size());
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const ProgramStep& st = p.steps[s];
    auto touch = [&](int b) {
      auto& a = access[static_cast<std::size_t>(p.root(b))];
      if (a.empty() || a.back() != static_cast<int>(s)) a.push_back(static_cast<int>(s));
    };
    touch(st.result);
    for (int o : st.operands) touch(o);
  }
  std::vector<int> arena;
  for (std::size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].kind == BufferKind::arena && !access[b].empty()) arena.push_back(static_cast<int>(b));
  std::stable_sort(arena.begin(), arena.end(), [&](int a, int b) {
    return bytes[static_cast<std::size_t>(a)] > bytes[static_cast<std::size_t>(b)];
  });
  auto ordered = [&](int x, int y) {  // every access of x happens before y's first write
    const int first = access[static_cast<std::size_t>(y)].front();
    for (int s : access[static_cast<std::size_t>(x)])
      if (!hb.before(s, first)) return false;
    return true;
  };
  std::vector<int> placed;
  for (int b : arena) {
    const std::size_t size = align(std::max<std::size_t>(bytes[static_cast<std::size_t>(b)], 1));
    plan.sum_bytes += size;
    std::vector<std::pair<std::size_t, std::size_t>> busy;  // [start, end)
    for (int q : placed)
      if (!ordered(q, b) && !ordered(b, q)) {
        auto off = static_cast<std::size_t>(plan.offsets[static_cast<std::size_t>(q)]);
        busy.emplace_back(off, off + align(std::max<std::size_t>(bytes[static_cast<std::size_t>(q)], 1)));
      }
    std::sort(busy.begin(), busy.end());
    std::size_t at = 0;
    for (const auto& [s, e] : busy) {
      if (at + size <= s) break;
      at = std::max(at, e);
    }
    plan.offsets[static_cast<std::size_t>(b)] = static_cast<int64_t>(at);
    plan.arena_bytes = std::max(plan.arena_bytes, at + size);
    placed.push_back(b);
  }
  return plan;
}

}  // namespace npucache::compiler
