#include "compiler/auto_dynamic.h"

#include <algorithm>

namespace npucache::compiler {

std::string dim_text(const DimMark& m) { return m.input + " dim " + std::to_string(m.dim); }

DynamicProfile::DynamicProfile(std::vector<DimMark> marked_dynamic, std::vector<DimMark> marked_static)
    : user_dynamic_(std::move(marked_dynamic)), user_static_(std::move(marked_static)) {}

bool DynamicProfile::is_dynamic(const DimMark& m) const {
  return std::find(user_dynamic_.begin(), user_dynamic_.end(), m) != user_dynamic_.end() ||
         std::binary_search(learned_.begin(), learned_.end(), m);
}

bool DynamicProfile::is_static(const DimMark& m) const {
  return std::find(user_static_.begin(), user_static_.end(), m) != user_static_.end();
}

std::vector<DimMark> DynamicProfile::merge(const std::vector<DimMark>& dims) {
  std::vector<DimMark> added;
  for (const auto& m : dims)
    if (!is_dynamic(m) && !is_static(m)) {
      learned_.insert(std::upper_bound(learned_.begin(), learned_.end(), m), m);
      added.push_back(m);
    }
  return added;
}

void DynamicProfile::note_compiled(const FlatArgs& args) {
  sizes_.clear();
  for (const auto& [path, t] : args.tensors)
    if (t.defined() && !t.is_traced()) sizes_[path] = concrete_dims(t.type().shape);
  for (const auto& [path, v] : args.symints) sizes_[path] = {v};  // a SymInt is its "dim 0"
}

std::vector<DimMark> DynamicProfile::changed_dims(const FlatArgs& args) const {
  std::vector<DimMark> out;
  for (const auto& [path, t] : args.tensors) {
    auto it = sizes_.find(path);
    if (it == sizes_.end() || !t.defined() || t.is_traced()) continue;
    const std::vector<int64_t> now = concrete_dims(t.type().shape);
    if (now.size() != it->second.size()) continue;  // a rank change is not a size change
    for (std::size_t d = 0; d < now.size(); ++d) {
      const DimMark m{path, static_cast<int64_t>(d)};
      if (now[d] != it->second[d] && !is_dynamic(m) && !is_static(m)) out.push_back(m);
    }
  }
  for (const auto& [path, v] : args.symints) {
    auto it = sizes_.find(path);
    const DimMark m{path, 0};
    if (it != sizes_.end() && it->second != std::vector<int64_t>{v} && !is_dynamic(m) && !is_static(m))
      out.push_back(m);
  }
  return out;
}

void DynamicProfile::apply(TraceOptions& t, const FlatArgs* args) const {
  auto size_of = [&](const DimMark& m) -> int64_t {
    if (args == nullptr) return 2;
    for (const auto& [path, tensor] : args->tensors)
      if (path == m.input) {
        const Shape s = tensor.type().shape;
        if (m.dim < static_cast<int64_t>(s.size()))
          return s[static_cast<std::size_t>(m.dim)].try_constant().value_or(2);
      }
    return 2;
  };
  t.dynamic_dims.clear();
  t.static_dims.clear();
  for (const auto& m : user_dynamic_) t.dynamic_dims.emplace_back(m.input, m.dim);
  for (const auto& m : learned_)
    if (size_of(m) >= 2) t.dynamic_dims.emplace_back(m.input, m.dim);
  for (const auto& m : user_static_) t.static_dims.emplace_back(m.input, m.dim);
}

}  // namespace npucache::compiler
