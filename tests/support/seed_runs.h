// One call of the seed model's method through cache_compile into a cache
// directory (a save, or a hit), with one autotune candidate: what the tests
// of commands beside jobs use as "a job" in one process.
#pragma once

#include <npucache/cache.h>
#include <npucache/models/models.h>

#include <filesystem>
#include <string>
#include <vector>

namespace npucache::testing_support {

using SeedMethod = Tensor (models::SeedExample::*)(const models::InputMeta&, const std::vector<Tensor>&);

// `code_version` (not empty): checked by the code_version hit check, so a
// run of another version saves again.
inline void run_seed(const std::filesystem::path& d, SeedMethod method, const std::string& code_version = "") {
  CacheOptions o;
  o.code_version = code_version;
  if (!code_version.empty()) o.hit_check = HitCheck::code_version;
  o.cache_dir = d.string();
  o.compile.config = CompilerConfig{};
  o.compile.config->autotune_candidates = 1;
  models::SeedExample m;
  auto fn = cache_compile(m, method, o);
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), false};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  fn(x, kv);
}

}  // namespace npucache::testing_support
