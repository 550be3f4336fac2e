// Deterministic weights: element i of the full (unsharded) parameter `name`
// is a uniform value in [-scale, scale) drawn from (seed, name, i), so every
// rank builds its shard of the same model with no download and no exchange.
#pragma once

#include <npucache/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace npucache::models {

std::vector<float> full_weights(uint64_t seed, const std::string& name, int64_t count, double scale);

// Fills `t` [rows_local, cols_local] with its shard of the full [rows, cols]
// matrix `name`: shard index `rank` of `parts` along `axis` (0 rows, 1 cols).
// Only the shard's elements are generated (a rank never holds the full
// matrix); they equal the same elements of full_weights. A vector (a bias)
// is a [rows, 1] matrix.
void fill_shard(Tensor& t, uint64_t seed, const std::string& name, int64_t rows, int64_t cols, int axis, int rank,
                int parts, double scale);

}  // namespace npucache::models
