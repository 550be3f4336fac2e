// nn::Module (a tree of named parameters, buffers and submodules) and the
// layers models are built from.
//
// Names are stable and follow registration order: a parameter "weight" of a
// submodule "q_proj" of "attn" is "attn.q_proj.weight". Tracing binds graph
// placeholders to these names; weights are never part of a graph.
//
// Tensors are handles: the module's registry and the layer's member refer to
// the same storage. Modules are neither copyable nor movable (submodules are
// held by shared_ptr).
#pragma once

#include <npucache/export.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <npucache/ops.h>
#include <npucache/tensor.h>

namespace npucache::nn {

class NPUCACHE_API Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The model class name used in cache keys and model_info (default: the
  // fully qualified, demangled C++ class name, "ns::Model"; log lines show
  // it without namespaces).
  virtual std::string type_name() const;

  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 protected:
  // Registers and returns `t`; throws ConfigError on a duplicate or empty
  // name or a name containing '.'.
  Tensor register_parameter(const std::string& name, Tensor t);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

 private:
  NPUCACHE_LOCAL void check_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  NPUCACHE_LOCAL void collect(const std::string& prefix, bool buffers,
                              std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Meta parameters: while a MetaScope is alive on the calling thread, the
// layers below (and new_parameter) create meta parameters (Tensor::meta):
// the module has every parameter with its name and type, and no weight
// memory. Such a module traces, compiles and caches like any other (the
// parameters become graph placeholders, which need only their types);
// running it, or filling its parameters, throws MetaTensorError. Scopes
// nest; the thread's setting is restored when a scope ends.
class NPUCACHE_API MetaScope {
 public:
  MetaScope();
  ~MetaScope();
  MetaScope(const MetaScope&) = delete;
  MetaScope& operator=(const MetaScope&) = delete;
  // Whether a MetaScope is alive on the calling thread.
  static bool active();
};

// A new parameter of these dims, every element `value`, on the current
// device; a meta tensor inside a MetaScope.
NPUCACHE_API Tensor new_parameter(const std::vector<int64_t>& dims, float value = 0.0f);

// Layers: Linear, Embedding, RMSNorm, LayerNorm and the tensor-parallel
// variants. Parameters start at zero (norm weights at one) on the current
// device, or meta inside a MetaScope; models fill them (Tensor::copy_from).
//
// Tensor parallelism (Megatron style) over the `tp` group:
// - ColumnParallelLinear holds out_features / tp rows of the weight: its
//   output is sharded on the last dim.
// - RowParallelLinear holds in_features / tp columns: it takes a sharded
//   input and all_reduces the partial products over `tp`.
// - VocabParallelEmbedding holds vocab / tp rows; ids are shifted by
//   group_rank(tp) * rows at run time (the graph stays rank-independent),
//   out-of-range ids give zero rows, and the result is all_reduced.
class NPUCACHE_API Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // [out, in], [out] or undefined
};

class NPUCACHE_API Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;  // [num, dim]
};

class NPUCACHE_API RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) const;
  Tensor weight;
  double eps;
};

class NPUCACHE_API LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  double eps;
};

// Throws ConfigError when `total` is not divisible by `tp`.
NPUCACHE_API int64_t shard_size(int64_t total, int64_t tp, const char* what);

class NPUCACHE_API ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, int64_t tp, bool bias = false,
                       bool gather_output = false);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // [out/tp, in]
  int64_t tp;
  bool gather_output;
};

class NPUCACHE_API RowParallelLinear : public Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, int64_t tp, bool bias = false);
  Tensor forward(const Tensor& x_sharded) const;
  Tensor weight, bias;  // [out, in/tp]
  int64_t tp;
};

class NPUCACHE_API VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t dim, int64_t tp);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;  // [vocab/tp, dim]
  int64_t tp;
};

}  // namespace npucache::nn
