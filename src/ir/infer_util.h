// Helpers shared by the shape/dtype inference rules (infer_*.cpp).
//
// A rule decides the equality and order of dims by their structure and
// constants (DimUnifier, SymExpr arithmetic), never by a symbol's name:
// SymExpr's operator< and str() depend on names and serve maps and messages
// only. A linked program's loader relies on it: it does not type again the
// steps of a region call that only renames the body's symbols one to one
// (compiler/link_program.h, ProgramLinkStats::typed).
#pragma once

#include <npucache/error.h>
#include <npucache/ir/graph.h>

#include <string>
#include <vector>

namespace npucache::ir {

struct InferCtx {
  Op op;
  const std::vector<const TensorType*>& in;
  const Attrs& attrs;
  DimUnifier& unifier;

  const TensorType& operand(std::size_t i) const { return *in.at(i); }
  std::size_t rank(std::size_t i) const { return in.at(i)->shape.size(); }

  // Throws ShapeError: "<op>: <what> (operands: f32[2, 3], i64[4])".
  [[noreturn]] void fail(const std::string& what) const;
  void require_dtype_equal(std::size_t a, std::size_t b) const;
  void require_floating(std::size_t i) const;
  void require_integral(std::size_t i) const;
  void require_rank(std::size_t i, std::size_t rank) const;
  void require_dim_equal(const SymExpr& a, const SymExpr& b, const std::string& what) const;
  // a <= b, guarded while tracing (DimUnifier::require_le); fails with
  // `what` when the sizes at hand violate it.
  void require_le(const SymExpr& a, const SymExpr& b, const std::string& what) const;
  // The dim's constant value (specialising symbols while tracing); fails
  // with `what` when it cannot be known.
  int64_t require_constant(const SymExpr& d, const std::string& what) const;
  // Normalises a possibly negative dim index against `rank`.
  int64_t norm_dim(int64_t dim, std::size_t rank) const;
  // Numpy-style broadcast of two shapes.
  Shape broadcast(const Shape& a, const Shape& b) const;
};

TensorType infer_elementwise(const InferCtx& c);
TensorType infer_linalg(const InferCtx& c);
TensorType infer_layout(const InferCtx& c);
TensorType infer_special(const InferCtx& c);
TensorType infer_fused(const InferCtx& c);

}  // namespace npucache::ir
