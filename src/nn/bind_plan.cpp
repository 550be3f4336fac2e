#include "nn/bind_plan.h"

#include <algorithm>
#include <optional>

namespace npucache::nn {

namespace {
// The same readings as InputSignature::bind (trace.cpp).
const std::string* symbol_of_dim(const SymExpr& e) {
  const auto& t = e.terms();
  if (t.size() == 1 && t.begin()->first.size() == 1 && t.begin()->second == 1) return &t.begin()->first.front();
  return nullptr;
}
std::optional<int64_t> constant_of_dim(const SymExpr& e) {
  const auto& t = e.terms();
  if (t.empty()) return 0;
  if (t.size() == 1 && t.begin()->first.empty()) return t.begin()->second;
  return std::nullopt;
}
int64_t call_dim_value(const SymExpr& e) {
  if (const auto c = constant_of_dim(e)) return *c;
  return e.constant();  // throws, naming the dim
}
}  // namespace

BindPlan::BindPlan(const InputSignature& signature) : sig_(signature) {
  for (const auto& in : sig_.inputs)
    for (const auto& d : in.type.shape)
      if (const std::string* s = symbol_of_dim(d)) names_.push_back(*s);
  for (const auto& si : sig_.sym_inputs)
    if (const std::string* s = si.expr.symbol_name()) names_.push_back(*s);
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
  auto slot = [&](const std::string& s) {
    return static_cast<int32_t>(std::lower_bound(names_.begin(), names_.end(), s) - names_.begin());
  };
  for (const auto& in : sig_.inputs) {
    first_.push_back(dims_.size());
    for (const auto& d : in.type.shape) {
      const std::string* s = symbol_of_dim(d);
      dims_.push_back(s ? slot(*s) : kChecked);
    }
  }
  first_.push_back(dims_.size());
  for (const auto& si : sig_.sym_inputs) {
    const std::string* s = si.expr.symbol_name();
    sym_inputs_.push_back(s ? slot(*s) : kChecked);
  }
  auto side = [&](const SymExpr& e) {
    Side out;
    if (const auto c = constant_of_dim(e)) {
      out = {kConstant, *c};
    } else if (const std::string* s = symbol_of_dim(e)) {
      const int32_t k = slot(*s);
      if (static_cast<std::size_t>(k) < names_.size() && names_[static_cast<std::size_t>(k)] == *s) out.slot = k;
    }
    return out;
  };
  for (const auto& b : sig_.dim_bounds) bounds_.emplace_back(side(b.lhs), side(b.rhs));
}

SymBindings BindPlan::bind(const FlatArgs& args) const {
  for (const auto& [p, t] : args.tensors) {
    if (!t.defined()) throw TraceError("input '" + p + "' is an undefined tensor");
    if (t.is_traced()) throw TraceError("input '" + p + "' is a traced tensor");
  }
  const auto& inputs = sig_.inputs;
  if (args.tensors.size() != inputs.size())
    throw TraceError("call has " + std::to_string(args.tensors.size()) + " tensor inputs, the trace has " +
                     std::to_string(inputs.size()));
  // Per symbol: its value, and whether a dim bound it yet.
  std::vector<std::pair<int64_t, bool>> vals(names_.size(), {0, false});
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& spec = inputs[i];
    const std::string& path = args.tensors[i].first;
    const TensorType& t = args.tensors[i].second.impl()->type;
    auto where = [&] { return "input '" + spec.path + "'"; };
    if (path != spec.path) throw TraceError(where() + " is '" + path + "' in this call");
    if (t.dtype != spec.type.dtype || t.shape.size() != spec.type.shape.size())
      throw TraceError(where() + " is " + type_str(t) + ", the trace expects " + type_str(spec.type));
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      const int32_t k = dims_[first_[i] + d];
      if (k == kChecked) continue;
      const int64_t actual = call_dim_value(t.shape[d]);
      auto& [value, bound] = vals[static_cast<std::size_t>(k)];
      if (!bound) {
        value = actual;
        bound = true;
      } else if (value != actual) {
        throw TraceError(where() + " dim " + std::to_string(d) + " is " + std::to_string(actual) +
                         " but the trace requires it to equal " + names_[static_cast<std::size_t>(k)] + " = " +
                         std::to_string(value));
      }
    }
  }
  const auto& sym_inputs = sig_.sym_inputs;
  if (args.symints.size() != sym_inputs.size())
    throw TraceError("call has " + std::to_string(args.symints.size()) + " SymInt inputs, the trace has " +
                     std::to_string(sym_inputs.size()));
  for (std::size_t i = 0; i < sym_inputs.size(); ++i) {
    const auto& [path, v] = args.symints[i];
    if (path != sym_inputs[i].path)
      throw TraceError("SymInt input '" + sym_inputs[i].path + "' is '" + path + "' in this call");
    const int32_t k = sym_inputs_[i];
    if (k == kChecked) continue;
    auto& [value, bound] = vals[static_cast<std::size_t>(k)];
    if (!bound) {
      value = v;
      bound = true;
    } else if (value != v) {
      throw TraceError("SymInt '" + path + "' is " + std::to_string(v) + " but the trace requires it to equal " +
                       names_[static_cast<std::size_t>(k)] + " = " + std::to_string(value));
    }
  }
  SymBindings b;
  for (std::size_t k = 0; k < names_.size(); ++k)  // sorted: each goes at the end
    if (vals[k].second) b.emplace_hint(b.end(), names_[k], vals[k].first);
  for (std::size_t i = 0; i < sym_inputs.size(); ++i) {
    if (sym_inputs_[i] != kChecked) continue;
    if (sym_inputs[i].expr.evaluate(b) != args.symints[i].second)
      throw TraceError("guard failed: SymInt '" + sym_inputs[i].path + "' was " + sym_inputs[i].expr.str() +
                       " when traced, now " + std::to_string(args.symints[i].second));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {  // constants and compound dims
    const Shape& shape = args.tensors[i].second.impl()->type.shape;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (dims_[first_[i] + d] != kChecked) continue;
      const SymExpr& want = inputs[i].type.shape[d];
      const int64_t actual = call_dim_value(shape[d]);
      const std::optional<int64_t> fixed = constant_of_dim(want);
      if ((fixed ? *fixed : want.evaluate(b)) != actual)
        throw TraceError("input '" + inputs[i].path + "' dim " + std::to_string(d) + " is " + std::to_string(actual) +
                         ", the trace was specialised to " + want.str());
    }
  }
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    const DimBound& bound = sig_.dim_bounds[i];
    auto value = [&](const Side& side, const SymExpr& e) {
      if (side.slot == kConstant) return side.value;
      if (side.slot >= 0) return vals[static_cast<std::size_t>(side.slot)].first;
      return e.evaluate(b);
    };
    const int64_t l = value(bounds_[i].first, bound.lhs), r = value(bounds_[i].second, bound.rhs);
    if (l > r)
      throw TraceError("the call's sizes break a guard of the trace: " + bound.lhs.str() + " <= " + bound.rhs.str() +
                       " (here " + std::to_string(l) + " > " + std::to_string(r) + ")");
  }
  const auto& guards = sig_.guards;
  if (args.values.size() != guards.size())
    throw TraceError("call has " + std::to_string(args.values.size()) + " plain-value inputs, the trace has " +
                     std::to_string(guards.size()));
  for (std::size_t i = 0; i < guards.size(); ++i)
    if (args.values[i].path != guards[i].path || args.values[i].value != guards[i].value)
      throw TraceError("guard failed: '" + guards[i].path + "' was " + guards[i].value + " when traced, now " +
                       args.values[i].value);
  return b;
}

}  // namespace npucache::nn
