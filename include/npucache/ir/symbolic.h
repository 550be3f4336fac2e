// Symbolic integer expressions for tensor dimensions.
//
// A SymExpr is a polynomial with integer coefficients over named symbols
// ("s0", "batch", ...), kept in a canonical form: terms sorted, zero terms
// dropped, symbols inside a term sorted. So structurally equal expressions
// compare equal whatever order they were built in ("s0 + 2*s1" == "s1*2 +
// s0"). This is the algebra reshape, flatten and concat need: sums,
// products, and exact division by a term (numel / known dims).
//
// Thread safety: values are immutable after construction; share freely.
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace npucache {

using SymBindings = std::map<std::string, int64_t>;

class NPUCACHE_API SymExpr {
 public:
  SymExpr() = default;                                                // the constant 0
  SymExpr(int64_t constant);                                          // NOLINT: implicit, dims are ints
  SymExpr(int constant) : SymExpr(static_cast<int64_t>(constant)) {}  // NOLINT
  static SymExpr symbol(const std::string& name);

  bool is_constant() const;
  // The constant value, if this expression has no symbols.
  std::optional<int64_t> try_constant() const;
  // The constant value; throws ShapeError when symbolic.
  int64_t constant() const;
  // The symbol name when the expression is exactly one symbol (coefficient 1).
  std::optional<std::string> as_symbol() const;
  // The same without a copy: the symbol's name (valid while this lives), or null.
  const std::string* symbol_name() const noexcept;
  std::set<std::string> symbols() const;

  // Value under `bindings`; throws ShapeError naming an unbound symbol.
  int64_t evaluate(const SymBindings& bindings) const;
  // Replaces symbols by expressions.
  SymExpr substitute(const std::map<std::string, SymExpr>& map) const;
  // this / divisor when every term divides exactly; nullopt otherwise.
  // The divisor must be a single term (c * s0 * s1 ...), c != 0.
  std::optional<SymExpr> div_exact(const SymExpr& divisor) const;

  // Canonical text: "2*s0*s1 + s0 + 3"; "0" for zero.
  std::string str() const;

  friend NPUCACHE_API SymExpr operator+(const SymExpr& a, const SymExpr& b);
  friend NPUCACHE_API SymExpr operator-(const SymExpr& a, const SymExpr& b);
  friend NPUCACHE_API SymExpr operator*(const SymExpr& a, const SymExpr& b);
  SymExpr operator-() const;
  friend bool operator==(const SymExpr& a, const SymExpr& b) { return a.terms_ == b.terms_; }
  friend bool operator<(const SymExpr& a, const SymExpr& b) { return a.terms_ < b.terms_; }

  // Canonical terms: monomial (sorted symbol names, repeated for powers) ->
  // coefficient. Used by hashing and serialization.
  using Monomial = std::vector<std::string>;
  const std::map<Monomial, int64_t>& terms() const { return terms_; }
  static SymExpr from_terms(std::map<Monomial, int64_t> terms);

 private:
  NPUCACHE_LOCAL void normalize();
  std::map<Monomial, int64_t> terms_;
};

using Shape = std::vector<SymExpr>;

// Product of all dims (1 for a scalar).
NPUCACHE_API SymExpr numel(const Shape& shape);
// "[2, s0, s0*4]".
NPUCACHE_API std::string shape_str(const Shape& shape);
// Concrete dims; throws ShapeError naming the symbolic dim.
NPUCACHE_API std::vector<int64_t> concrete_dims(const Shape& shape);
NPUCACHE_API std::vector<int64_t> evaluate_dims(const Shape& shape, const SymBindings& bindings);
NPUCACHE_API Shape shape_of(const std::vector<int64_t>& dims);

}  // namespace npucache
