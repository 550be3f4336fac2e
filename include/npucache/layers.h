// Layers: Linear, Embedding, RMSNorm, LayerNorm and the tensor-parallel
// variants. Parameters start at zero on the current device; models fill
// them (Tensor::copy_from).
//
// Tensor parallelism (Megatron style) over the `tp` group:
// - ColumnParallelLinear holds out_features / tp rows of the weight: its
//   output is sharded on the last dim.
// - RowParallelLinear holds in_features / tp columns: it takes a sharded
//   input and all_reduces the partial products over `tp`.
// - VocabParallelEmbedding holds vocab / tp rows; ids are shifted by
//   group_rank(tp) * rows at run time (the graph stays rank-independent),
//   out-of-range ids give zero rows, and the result is all_reduced.
#pragma once

#include <npucache/module.h>
#include <npucache/ops.h>

namespace npucache::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // [out, in], [out] or undefined
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;  // [num, dim]
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) const;
  Tensor weight;
  double eps;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  double eps;
};

// Throws ConfigError when `total` is not divisible by `tp`.
int64_t shard_size(int64_t total, int64_t tp, const char* what);

class ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, int64_t tp, bool bias = false,
                       bool gather_output = false);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // [out/tp, in]
  int64_t tp;
  bool gather_output;
};

class RowParallelLinear : public Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, int64_t tp, bool bias = false);
  Tensor forward(const Tensor& x_sharded) const;
  Tensor weight, bias;  // [out, in/tp]
  int64_t tp;
};

class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t dim, int64_t tp);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;  // [vocab/tp, dim]
  int64_t tp;
};

}  // namespace npucache::nn
