// A small benchmark harness: runs variants interleaved (A, B, A, B, ...)
// so that a noisy, shared machine disturbs them alike, and reports medians.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace npucache::perf {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Each variant returns the seconds it measured for one trial (it may time
// only part of its work). Returns the median per variant.
inline std::vector<double> interleaved(const std::vector<std::function<double()>>& variants, int trials) {
  std::vector<std::vector<double>> t(variants.size());
  for (auto& v : variants) v();  // warm-up
  for (int i = 0; i < trials; ++i)
    for (std::size_t k = 0; k < variants.size(); ++k) t[k].push_back(variants[k]());
  std::vector<double> out;
  for (auto& s : t) out.push_back(median(s));
  return out;
}

}  // namespace npucache::perf
