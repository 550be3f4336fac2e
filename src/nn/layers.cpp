#include <npucache/error.h>
#include <npucache/module.h>

namespace npucache::nn {
namespace {
Tensor zeros(std::vector<int64_t> dims) { return new_parameter(dims, 0.0f); }
}  // namespace

int64_t shard_size(int64_t total, int64_t tp, const char* what) {
  if (tp < 1) throw ConfigError(std::string("tensor-parallel size must be >= 1 for ") + what);
  if (total % tp != 0)
    throw ConfigError(std::string(what) + " (" + std::to_string(total) +
                      ") is not divisible by the tensor-parallel size " + std::to_string(tp));
  return total / tp;
}

Linear::Linear(int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", zeros({out, in}));
  if (with_bias) bias = register_parameter("bias", zeros({out}));
}
Tensor Linear::forward(const Tensor& x) const { return ops::linear(x, weight, bias); }

Embedding::Embedding(int64_t num, int64_t dim) { weight = register_parameter("weight", zeros({num, dim})); }
Tensor Embedding::forward(const Tensor& ids) const { return ops::embedding(weight, ids); }

RMSNorm::RMSNorm(int64_t dim, double e) : eps(e) { weight = register_parameter("weight", new_parameter({dim}, 1.0f)); }
Tensor RMSNorm::forward(const Tensor& x) const { return ops::rmsnorm(x, weight, eps); }

LayerNorm::LayerNorm(int64_t dim, double e) : eps(e) {
  weight = register_parameter("weight", new_parameter({dim}, 1.0f));
  bias = register_parameter("bias", zeros({dim}));
}
Tensor LayerNorm::forward(const Tensor& x) const { return ops::layernorm(x, weight, bias, eps); }

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, int64_t tp_size, bool with_bias, bool gather)
    : tp(tp_size), gather_output(gather) {
  int64_t local = shard_size(out, tp, "ColumnParallelLinear out_features");
  weight = register_parameter("weight", zeros({local, in}));
  if (with_bias) bias = register_parameter("bias", zeros({local}));
}
Tensor ColumnParallelLinear::forward(const Tensor& x) const {
  Tensor y = ops::linear(x, weight, bias);
  return gather_output && tp > 1 ? ops::all_gather(y, "tp", -1, tp) : y;
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, int64_t tp_size, bool with_bias) : tp(tp_size) {
  int64_t local = shard_size(in, tp, "RowParallelLinear in_features");
  weight = register_parameter("weight", zeros({out, local}));
  if (with_bias) bias = register_parameter("bias", zeros({out}));
}
Tensor RowParallelLinear::forward(const Tensor& x) const {
  Tensor y = ops::linear(x, weight);
  if (tp > 1) y = ops::all_reduce(y, "tp");
  return bias.defined() ? y + bias : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t dim, int64_t tp_size) : tp(tp_size) {
  weight = register_parameter("weight", zeros({shard_size(vocab, tp, "vocabulary size"), dim}));
}
Tensor VocabParallelEmbedding::forward(const Tensor& ids) const {
  if (tp == 1) return ops::embedding(weight, ids);
  const SymExpr rows = weight.size(0);
  Tensor offset = ops::group_rank("tp") * static_cast<double>(rows.constant());
  Tensor local = ops::sub(ids.to(DType::i64), offset);
  return ops::all_reduce(ops::embedding(weight, local), "tp");
}

}  // namespace npucache::nn
