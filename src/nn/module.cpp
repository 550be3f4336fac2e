#include <npucache/error.h>
#include <npucache/module.h>

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace npucache::nn {
namespace {
thread_local int t_meta_depth = 0;
}  // namespace

MetaScope::MetaScope() { ++t_meta_depth; }
MetaScope::~MetaScope() { --t_meta_depth; }
bool MetaScope::active() { return t_meta_depth > 0; }

Tensor new_parameter(const std::vector<int64_t>& dims, float value) {
  if (MetaScope::active()) return Tensor::meta(dims);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(n), value), dims);
}

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(mangled);
}

void Module::check_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ConfigError("module member name '" + name + "' must be non-empty and contain no '.'");
  for (const auto& [n, t] : params_)
    if (n == name) throw ConfigError("'" + name + "' is already registered on " + type_name());
  for (const auto& [n, t] : buffers_)
    if (n == name) throw ConfigError("'" + name + "' is already registered on " + type_name());
  for (const auto& [n, m] : children_)
    if (n == name) throw ConfigError("'" + name + "' is already registered on " + type_name());
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name);
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name);
  if (!m) throw ConfigError("submodule '" + name + "' is null");
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, bool buffers, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", buffers, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, out);
  return out;
}

}  // namespace npucache::nn
