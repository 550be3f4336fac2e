// nn::Module: a tree of named parameters, buffers and submodules.
//
// Names are stable and follow registration order: a parameter "weight" of a
// submodule "q_proj" of "attn" is "attn.q_proj.weight". Tracing binds graph
// placeholders to these names; weights are never part of a graph.
//
// Tensors are handles: the module's registry and the layer's member refer to
// the same storage. Modules are neither copyable nor movable (submodules are
// held by shared_ptr).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <npucache/tensor.h>

namespace npucache::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The model class name used in cache keys (default: the demangled C++
  // class name without namespaces).
  virtual std::string type_name() const;

  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

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
  void check_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void collect(const std::string& prefix, bool buffers,
               std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace npucache::nn
