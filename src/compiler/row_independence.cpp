#include "compiler/row_independence.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace npucache::compiler {
namespace {

// The row axes of a value (true at each), or nullopt when it mixes rows
// (or the analysis cannot tell).
using Rows = std::optional<std::vector<bool>>;

bool mentions(const SymExpr& e, const std::string& s) { return e.symbols().count(s) > 0; }
bool is(const SymExpr& e, const std::string& s) { return e.as_symbol() == s; }

bool attrs_mention(const Attrs& a, const std::string& s) {
  for (const auto& [key, v] : a.items())
    if (const auto* e = std::get_if<std::vector<SymExpr>>(&v))
      for (const auto& x : *e)
        if (mentions(x, s)) return true;
  return false;
}

bool depends(const Rows& r) { return !r || std::find(r->begin(), r->end(), true) != r->end(); }

std::size_t axis(int64_t d, std::size_t rank) {
  const auto n = static_cast<int64_t>(rank);
  return static_cast<std::size_t>(d < 0 ? d + n : d);
}

Rows whole_dims(const TensorType& t, const std::string& s) {
  std::vector<bool> r(t.shape.size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = is(t.shape[i], s);
  return r;
}

// Inputs broadcast against each other (aligned at the right).
Rows broadcast(const std::vector<const Rows*>& in, std::size_t rank) {
  std::vector<bool> out(rank, false);
  for (const Rows* r : in) {
    if (!*r || (*r)->size() > rank) return std::nullopt;
    const std::size_t off = rank - (*r)->size();
    for (std::size_t j = 0; j < (*r)->size(); ++j)
      if ((**r)[j]) out[off + j] = true;
  }
  return out;
}

// A matmul operand's row axes in the output: its leading (batch) axes
// aligned at the right of the output's, its free axis at `free_out`; a row
// axis contracted over mixes rows.
bool place_matmul(const std::vector<bool>& in, std::size_t contracted, std::size_t free, std::size_t free_out,
                  std::vector<bool>& out) {
  const std::size_t lead_in = in.size() - 2, lead_out = out.size() - 2;
  if (lead_in > lead_out) return false;
  for (std::size_t j = 0; j < in.size(); ++j) {
    if (!in[j]) continue;
    if (j == contracted) return false;
    if (j == free)
      out[free_out] = true;
    else
      out[lead_out - lead_in + j] = true;
  }
  return true;
}

Rows derive(const Node& n, const std::vector<const Rows*>& in, const std::string& s) {
  const std::size_t rank = n.type.shape.size();
  const bool any = std::any_of(in.begin(), in.end(), [](const Rows* r) { return depends(*r); });
  auto same_as = [&](std::size_t i) -> Rows { return *in[i]; };
  // Elementwise ops, casts and all_reduce: each output element reads the
  // input elements at its own index (OpInfo::pointwise).
  if (op_info(n.op).pointwise) return broadcast(in, rank);
  switch (n.op) {
    case Op::placeholder:
      if (n.kind != PlaceholderKind::input) return std::vector<bool>(rank, false);
      return whole_dims(n.type, s);
    case Op::full:
    case Op::arange: return whole_dims(n.type, s);
    case Op::matmul: {
      if (!*in[0] || !*in[1] || rank < 2) return std::nullopt;
      const auto& a = **in[0];
      const auto& b = **in[1];
      if (a.size() < 2 || b.size() < 2) return std::nullopt;
      const bool tb = n.attrs.get_bool_or("trans_b", false);
      std::vector<bool> out(rank, false);
      if (!place_matmul(a, a.size() - 1, a.size() - 2, rank - 2, out)) return std::nullopt;
      if (!place_matmul(b, tb ? b.size() - 1 : b.size() - 2, tb ? b.size() - 2 : b.size() - 1, rank - 1, out))
        return std::nullopt;
      return out;
    }
    case Op::linear:
    case Op::rmsnorm:
    case Op::layernorm: {
      // Along the last axis: features mixed (linear) or normalised together.
      for (std::size_t i = 1; i < in.size(); ++i)
        if (depends(*in[i])) return std::nullopt;
      if (!*in[0] || (*in[0])->empty() || (*in[0])->back()) return std::nullopt;
      return same_as(0);
    }
    case Op::sum:
    case Op::mean:
    case Op::max:
    case Op::argmax: {
      if (!*in[0]) return std::nullopt;
      const auto& x = **in[0];
      std::vector<bool> reduced(x.size(), false);
      if (n.op == Op::argmax)
        reduced[axis(n.attrs.get_int("dim"), x.size())] = true;
      else
        for (int64_t d : n.attrs.get<std::vector<int64_t>>("dims")) reduced[axis(d, x.size())] = true;
      const bool keep = n.attrs.get_bool_or("keepdim", false);
      std::vector<bool> out;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (reduced[i] && x[i]) return std::nullopt;  // a reduction over rows
        if (!reduced[i])
          out.push_back(x[i]);
        else if (keep)
          out.push_back(false);
      }
      return out;
    }
    case Op::softmax: {
      if (!*in[0] || (**in[0])[axis(n.attrs.get_int("dim"), (*in[0])->size())]) return std::nullopt;
      return same_as(0);
    }
    case Op::rope: {  // x [B, S, H, D], positions [B, S]: element (b, s) reads row (b, s) of both
      if (!*in[0] || !*in[1]) return std::nullopt;
      std::vector<bool> out = **in[0];
      for (std::size_t j = 0; j < (*in[1])->size() && j < out.size(); ++j)
        if ((**in[1])[j]) out[j] = true;
      return out;
    }
    case Op::attention:
    case Op::fused_attention: {
      // Batches (axis 0) are independent; heads, queries and keys are not
      // padded here.
      for (const Rows* r : in) {
        if (!*r) return std::nullopt;
        for (std::size_t j = 1; j < (*r)->size(); ++j)
          if ((**r)[j]) return std::nullopt;
      }
      return same_as(0);
    }
    case Op::reshape: return std::nullopt;  // row_independent calls reshape_rows
    case Op::permute: {
      if (!*in[0]) return std::nullopt;
      const auto& perm = n.attrs.get<std::vector<int64_t>>("perm");
      std::vector<bool> out(rank, false);
      for (std::size_t i = 0; i < rank && i < perm.size(); ++i) out[i] = (**in[0])[axis(perm[i], rank)];
      return out;
    }
    case Op::transpose: {
      if (!*in[0]) return std::nullopt;
      std::vector<bool> out = **in[0];
      const std::size_t a = axis(n.attrs.get_int("dim0"), rank), b = axis(n.attrs.get_int("dim1"), rank);
      const bool t = out[a];
      out[a] = out[b];
      out[b] = t;
      return out;
    }
    case Op::expand: {
      if (!*in[0] || (*in[0])->size() > rank) return std::nullopt;
      std::vector<bool> out(rank, false);
      const std::size_t off = rank - (*in[0])->size();
      for (std::size_t i = 0; i < rank; ++i)
        out[i] = (i >= off && (**in[0])[i - off]) || is(n.type.shape[i], s);  // a broadcast row is every row
      return out;
    }
    case Op::slice: {
      if (!*in[0]) return std::nullopt;
      const std::size_t d = axis(n.attrs.get_int("dim"), rank);
      const auto& bounds = n.attrs.get<std::vector<SymExpr>>("bounds");
      if (!(**in[0])[d]) {
        for (const auto& b : bounds)
          if (mentions(b, s)) return std::nullopt;
        return same_as(0);
      }
      if (bounds.size() == 2 && bounds[0].try_constant() == 0 && is(bounds[1], s)) return same_as(0);
      return std::nullopt;
    }
    case Op::concat: {
      const std::size_t d = axis(n.attrs.get_int("dim"), rank);
      std::vector<bool> out(rank, false);
      for (const Rows* r : in) {
        if (!*r || (*r)->size() != rank || (**r)[d]) return std::nullopt;
        for (std::size_t j = 0; j < rank; ++j) out[j] = out[j] || (**r)[j];
      }
      return out;
    }
    case Op::embedding: {  // weight [V, D], ids [...]: out [..., D]
      if (depends(*in[0]) || !*in[1]) return std::nullopt;
      std::vector<bool> out = **in[1];
      out.push_back(false);
      return out;
    }
    case Op::group_rank: return std::vector<bool>(rank, false);
    default:
      // Gathers, collectives along a dim, point-to-point, random numbers,
      // updates in place, fused code: rows may mix, or padding may leave the
      // program. Safe only when nothing of the symbol reaches the op.
      if (any) return std::nullopt;
      return std::vector<bool>(rank, false);
  }
}

// Reshape: a single row axis keeps its rows when it is a whole output dim
// with the same number of elements before it.
Rows reshape_rows(const Node& n, const Node& input, const std::vector<bool>& x, const std::string& s) {
  std::size_t a = x.size();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i]) {
      if (a != x.size()) return std::nullopt;  // two row axes
      a = i;
    }
  if (a == x.size()) return std::vector<bool>(n.type.shape.size(), false);
  SymExpr before_in(1);
  for (std::size_t i = 0; i < a; ++i) before_in = before_in * input.type.shape[i];
  SymExpr before_out(1);
  for (std::size_t b = 0; b < n.type.shape.size(); ++b) {
    if (is(n.type.shape[b], s) && (before_out - before_in).try_constant() == 0) {
      std::vector<bool> out(n.type.shape.size(), false);
      out[b] = true;
      return out;
    }
    before_out = before_out * n.type.shape[b];
  }
  return std::nullopt;
}

// A value's row axes must be exactly its dims equal to the symbol, and no
// other dim may mention it.
Rows checked(Rows r, const TensorType& t, const std::string& s) {
  if (!r) return r;
  if (r->size() != t.shape.size()) return std::nullopt;
  for (std::size_t i = 0; i < r->size(); ++i) {
    const bool whole = is(t.shape[i], s);
    if ((*r)[i] != whole || (!whole && mentions(t.shape[i], s))) return std::nullopt;
  }
  return r;
}

}  // namespace

bool row_independent(const Graph& g, const std::string& symbol) {
  const auto& nodes = g.nodes();
  std::vector<Rows> rows(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::vector<const Rows*> in;
    in.reserve(n.inputs.size());
    bool fed = false;
    for (ValueId v : n.inputs) {
      in.push_back(&rows[static_cast<std::size_t>(v)]);
      fed = fed || depends(rows[static_cast<std::size_t>(v)]);
    }
    const bool shaped =
        n.op == Op::full || n.op == Op::arange || n.op == Op::reshape || n.op == Op::expand || n.op == Op::slice;
    Rows r;
    if (attrs_mention(n.attrs, symbol) && !shaped)
      r = std::nullopt;  // a size, length or bound computed from the symbol
    else if (n.op == Op::reshape && *in[0])
      r = reshape_rows(n, nodes[static_cast<std::size_t>(n.inputs[0])], **in[0], symbol);
    else
      r = derive(n, in, symbol);
    rows[i] = checked(std::move(r), n.type, symbol);
    // An update in place, a message or random numbers fed by the symbol
    // would write, send or draw for the padding rows too.
    if (op_info(n.op).side_effect && n.op != Op::all_reduce && (fed || depends(rows[i]))) return false;
  }
  for (ValueId o : g.outputs())
    if (!rows[static_cast<std::size_t>(o)]) return false;
  return true;
}

}  // namespace npucache::compiler
