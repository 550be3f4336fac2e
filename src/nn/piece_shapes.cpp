// Automatic dynamic for pieces (piece_shapes.h): the sites that changed
// between two recordings, a recording made general at them, and the exact
// match of a later recording against the general graph.
#include "nn/piece_shapes.h"

#include <npucache/error.h>

#include "nn/detail/trace_state.h"

#include <algorithm>
#include <set>

namespace npucache::nn {
namespace {

std::string attr_site(std::size_t node, const std::string& key) { return "n" + std::to_string(node) + "." + key; }

const std::vector<SymExpr>* dims_attr(const AttrValue& v) { return std::get_if<std::vector<SymExpr>>(&v); }

// Whether two nodes are one computation at other sizes; adds the sites
// whose integers differ.
bool same_but_sizes(std::size_t i, const Node& a, const Node& b, std::vector<PieceSite>& sites) {
  if (a.op != b.op || a.inputs != b.inputs || a.kind != b.kind || a.target != b.target) return false;
  if (a.type.dtype != b.type.dtype || a.type.shape.size() != b.type.shape.size()) return false;
  if (a.op == Op::placeholder) {
    if (a.kind != PlaceholderKind::input) return a.type == b.type;
    for (std::size_t d = 0; d < a.type.shape.size(); ++d)
      if (a.type.shape[d] != b.type.shape[d]) sites.push_back({a.target, static_cast<int64_t>(d)});
    return true;
  }
  const auto& x = a.attrs.items();
  const auto& y = b.attrs.items();
  if (x.size() != y.size()) return false;
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (x[k].first != y[k].first) return false;
    const auto *dx = dims_attr(x[k].second), *dy = dims_attr(y[k].second);
    if (!dx || !dy) {
      if (x[k].second != y[k].second) return false;
      continue;
    }
    if (dx->size() != dy->size()) return false;
    for (std::size_t j = 0; j < dx->size(); ++j)
      if ((*dx)[j] != (*dy)[j]) {
        if (!(*dx)[j].is_constant() || !(*dy)[j].is_constant()) return false;
        sites.push_back({attr_site(i, x[k].first), static_cast<int64_t>(j)});
      }
  }
  return true;
}

}  // namespace

std::optional<std::vector<PieceSite>> changed_sites(const Graph& before, const Graph& now) {
  if (before.size() != now.size() || before.outputs() != now.outputs()) return std::nullopt;
  std::vector<PieceSite> sites;
  for (std::size_t i = 0; i < now.size(); ++i)
    if (!same_but_sizes(i, before.nodes()[i], now.nodes()[i], sites)) return std::nullopt;
  return sites;
}

std::vector<PieceSite> all_sites(const Graph& g) {
  std::vector<PieceSite> sites;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::placeholder) {
      if (n.kind == PlaceholderKind::input)
        for (std::size_t d = 0; d < n.type.shape.size(); ++d)
          if (n.type.shape[d].try_constant().value_or(0) >= 2) sites.push_back({n.target, static_cast<int64_t>(d)});
      continue;
    }
    for (const auto& [key, v] : n.attrs.items())
      if (const auto* dims = dims_attr(v))
        for (std::size_t j = 0; j < dims->size(); ++j)
          if ((*dims)[j].try_constant().value_or(0) >= 2) sites.push_back({attr_site(i, key), static_cast<int64_t>(j)});
  }
  return sites;
}

std::optional<TraceResult> generalize(const TraceResult& piece, const std::vector<PieceSite>& sites) {
  const std::set<PieceSite> at(sites.begin(), sites.end());
  detail::ShapeEnv env;
  std::map<int64_t, SymExpr> base;  // value -> its symbol
  std::vector<SymExpr> created;
  auto symbol_for = [&](int64_t v) -> SymExpr {
    if (auto it = base.find(v); it != base.end()) return it->second;
    if (auto it = base.find(v - 1); it != base.end()) return it->second + 1;
    if (auto it = base.find(v + 1); it != base.end()) return it->second - 1;
    SymExpr s = env.fresh(v);
    base.emplace(v, s);
    created.push_back(s);
    return s;
  };
  Graph out;
  std::map<std::string, TensorType> input_types;
  try {
    for (std::size_t i = 0; i < piece.graph.size(); ++i) {
      const Node& n = piece.graph.nodes()[i];
      if (n.op == Op::placeholder) {
        TensorType t = n.type;
        if (n.kind == PlaceholderKind::input)
          for (std::size_t d = 0; d < t.shape.size(); ++d) {
            const int64_t v = t.shape[d].try_constant().value_or(0);
            if (v >= 2 && at.count({n.target, static_cast<int64_t>(d)})) t.shape[d] = symbol_for(v);
          }
        out.add_placeholder(n.kind, n.target, t);
        if (n.kind == PlaceholderKind::input) input_types[n.target] = t;
        continue;
      }
      Attrs attrs = n.attrs;
      for (const auto& [key, v] : n.attrs.items())
        if (const auto* dims = dims_attr(v)) {
          std::vector<SymExpr> general = *dims;
          bool changed = false;
          for (std::size_t j = 0; j < general.size(); ++j)
            if (auto c = general[j].try_constant();
                c && *c >= 2 && at.count({attr_site(i, key), static_cast<int64_t>(j)})) {
              general[j] = symbol_for(*c);
              changed = true;
            }
          if (changed) attrs.set(key, std::move(general));
        }
      out.add_node(n.op, n.inputs, std::move(attrs), &env);
    }
  } catch (const Error&) {
    return std::nullopt;  // a shape check needs a size: the piece stays static
  }
  out.set_outputs(piece.graph.outputs());
  TraceResult r;
  // Symbols an input dim is (a call's input binds them; one that is only
  // part of a dim, s0 + 1, is bound as a SymInt input).
  std::set<std::string> carried;
  std::vector<Shape> appearance;
  for (const auto& in : piece.signature.inputs) {
    const TensorType& t = input_types.at(in.path);
    r.signature.inputs.push_back({in.path, t});
    for (const auto& d : t.shape)
      if (auto name = env.resolve(d).as_symbol()) carried.insert(*name);
    appearance.push_back(t.shape);
  }
  Shape free;
  for (const auto& s : created)
    for (const auto& name : env.resolve(s).symbols())
      if (!carried.count(name) && std::find(free.begin(), free.end(), SymExpr::symbol(name)) == free.end())
        free.push_back(SymExpr::symbol(name));
  appearance.push_back(free);
  const auto subst = env.final_substitutions(appearance);
  out.substitute_symbols(subst);
  bool symbolic = !free.empty();
  for (auto& in : r.signature.inputs)
    for (auto& d : in.type.shape) {
      d = env.resolve(d).substitute(subst);
      symbolic = symbolic || !d.is_constant();
    }
  if (!symbolic) return std::nullopt;
  for (std::size_t k = 0; k < free.size(); ++k)
    r.signature.sym_inputs.push_back({"sym" + std::to_string(k), env.resolve(free[k]).substitute(subst)});
  r.signature.shape_guards = env.guards();
  for (const auto& bound : env.bounds()) {
    DimBound b{env.resolve(bound.lhs).substitute(subst), env.resolve(bound.rhs).substitute(subst)};
    if (b.lhs.is_constant() && b.rhs.is_constant()) continue;
    if (std::find(r.signature.dim_bounds.begin(), r.signature.dim_bounds.end(), b) == r.signature.dim_bounds.end())
      r.signature.dim_bounds.push_back(std::move(b));
  }
  try {
    verify(out);
  } catch (const Error&) {
    return std::nullopt;
  }
  r.graph = std::move(out);
  r.output_paths = piece.output_paths;
  r.name = piece.name;
  return r;
}

std::optional<SymBindings> match(const TraceResult& general, const Graph& concrete,
                                 std::vector<std::pair<std::string, int64_t>>* symints) {
  const Graph& g = general.graph;
  if (g.size() != concrete.size() || g.outputs() != concrete.outputs()) return std::nullopt;
  SymBindings b;
  std::vector<std::pair<const SymExpr*, int64_t>> deferred;
  auto take = [&](const SymExpr& want, const SymExpr& actual) {
    const auto a = actual.try_constant();
    if (!a) return false;
    if (auto c = want.try_constant()) return *c == *a;
    if (const std::string* s = want.symbol_name()) return b.try_emplace(*s, *a).first->second == *a;
    deferred.emplace_back(&want, *a);
    return true;
  };
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node &x = g.nodes()[i], &y = concrete.nodes()[i];
    if (x.op != y.op || x.inputs != y.inputs || x.kind != y.kind || x.target != y.target) return std::nullopt;
    if (x.type.dtype != y.type.dtype || x.type.shape.size() != y.type.shape.size()) return std::nullopt;
    if (x.op == Op::placeholder) {
      for (std::size_t d = 0; d < x.type.shape.size(); ++d)
        if (!take(x.type.shape[d], y.type.shape[d])) return std::nullopt;
      continue;
    }
    const auto& xi = x.attrs.items();
    const auto& yi = y.attrs.items();
    if (xi.size() != yi.size()) return std::nullopt;
    for (std::size_t k = 0; k < xi.size(); ++k) {
      if (xi[k].first != yi[k].first) return std::nullopt;
      const auto *dx = dims_attr(xi[k].second), *dy = dims_attr(yi[k].second);
      if (!dx || !dy) {
        if (xi[k].second != yi[k].second) return std::nullopt;
        continue;
      }
      if (dx->size() != dy->size()) return std::nullopt;
      for (std::size_t j = 0; j < dx->size(); ++j)
        if (!take((*dx)[j], (*dy)[j])) return std::nullopt;
    }
  }
  try {
    for (const auto& [e, v] : deferred)
      if (e->evaluate(b) != v) return std::nullopt;
    // Every value's type at these sizes: the general graph computes what
    // the recording does.
    for (std::size_t i = 0; i < g.size(); ++i) {
      const Shape &x = g.nodes()[i].type.shape, &y = concrete.nodes()[i].type.shape;
      for (std::size_t d = 0; d < x.size(); ++d)
        if (x[d].is_constant() ? x[d] != y[d] : x[d].evaluate(b) != y[d].try_constant().value_or(-1))
          return std::nullopt;
    }
    for (const auto& bound : general.signature.dim_bounds)
      if (bound.lhs.evaluate(b) > bound.rhs.evaluate(b)) return std::nullopt;
    if (symints) {
      symints->clear();
      for (const auto& si : general.signature.sym_inputs) symints->emplace_back(si.path, si.expr.evaluate(b));
    }
  } catch (const ShapeError&) {
    return std::nullopt;  // a symbol the recording does not give
  }
  return b;
}

}  // namespace npucache::nn
