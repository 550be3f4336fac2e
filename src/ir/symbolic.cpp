#include <npucache/error.h>
#include <npucache/ir/symbolic.h>

#include <algorithm>
#include <cstdint>

namespace npucache {
namespace {

// Dimension arithmetic is checked: expressions come from traces and from
// files, and an overflow would be a wrong size, not an error.
[[noreturn]] void overflow(const char* what) {
  throw ShapeError(std::string("dimension arithmetic overflows 64 bits (") + what +
                   "); the expression or the sizes bound to its symbols are out of range");
}
int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow("a sum");
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow("a product");
  return r;
}
// An expression with more terms than any shape needs is refused (products
// of long sums grow multiplicatively).
constexpr std::size_t kMaxTerms = 1024;
constexpr std::size_t kMaxDegree = 64;
void check_size(std::size_t terms, std::size_t degree) {
  if (terms > kMaxTerms || degree > kMaxDegree)
    throw ShapeError("a dimension expression with " + std::to_string(terms) + " terms of degree up to " +
                     std::to_string(degree) + " is larger than any shape needs (at most " + std::to_string(kMaxTerms) +
                     " terms of degree " + std::to_string(kMaxDegree) + ")");
}

}  // namespace

SymExpr::SymExpr(int64_t constant) {
  if (constant != 0) terms_[{}] = constant;
}

SymExpr SymExpr::symbol(const std::string& name) {
  if (name.empty()) throw ShapeError("symbol names must not be empty");
  SymExpr e;
  e.terms_[{name}] = 1;
  return e;
}

SymExpr SymExpr::from_terms(std::map<Monomial, int64_t> terms) {
  SymExpr e;
  for (auto& [m, c] : terms) {
    check_size(terms.size(), m.size());
    Monomial sorted = m;
    std::sort(sorted.begin(), sorted.end());
    int64_t& t = e.terms_[sorted];
    t = add(t, c);
  }
  e.normalize();
  return e;
}

void SymExpr::normalize() {
  for (auto it = terms_.begin(); it != terms_.end();) {
    if (it->second == 0)
      it = terms_.erase(it);
    else
      ++it;
  }
}

bool SymExpr::is_constant() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty()); }

std::optional<int64_t> SymExpr::try_constant() const {
  if (terms_.empty()) return 0;
  if (is_constant()) return terms_.begin()->second;
  return std::nullopt;
}

int64_t SymExpr::constant() const {
  auto c = try_constant();
  if (!c) throw ShapeError("dimension '" + str() + "' is symbolic where a constant is required");
  return *c;
}

std::optional<std::string> SymExpr::as_symbol() const {
  if (terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1)
    return terms_.begin()->first.front();
  return std::nullopt;
}

const std::string* SymExpr::symbol_name() const noexcept {
  if (terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1)
    return &terms_.begin()->first.front();
  return nullptr;
}

std::set<std::string> SymExpr::symbols() const {
  std::set<std::string> out;
  for (const auto& [m, c] : terms_) out.insert(m.begin(), m.end());
  return out;
}

int64_t SymExpr::evaluate(const SymBindings& bindings) const {
  int64_t total = 0;
  for (const auto& [m, c] : terms_) {
    int64_t v = c;
    for (const auto& s : m) {
      auto it = bindings.find(s);
      if (it == bindings.end())
        throw ShapeError("unknown symbol '" + s + "' in dimension '" + str() + "': no value is bound to it");
      v = mul(v, it->second);
    }
    total = add(total, v);
  }
  return total;
}

SymExpr SymExpr::substitute(const std::map<std::string, SymExpr>& map) const {
  SymExpr out;
  for (const auto& [m, c] : terms_) {
    SymExpr term(c);
    for (const auto& s : m) {
      auto it = map.find(s);
      term = term * (it == map.end() ? SymExpr::symbol(s) : it->second);
    }
    out = out + term;
  }
  return out;
}

std::optional<SymExpr> SymExpr::div_exact(const SymExpr& divisor) const {
  if (divisor.terms_.size() != 1) return std::nullopt;
  const auto& [dm, dc] = *divisor.terms_.begin();
  if (dc == 0) return std::nullopt;
  std::map<Monomial, int64_t> out;
  for (const auto& [m, c] : terms_) {
    if (dc == -1 && c == INT64_MIN) overflow("a quotient");
    if (c % dc != 0) return std::nullopt;
    Monomial rest = m;
    for (const auto& s : dm) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    int64_t& t = out[rest];
    t = add(t, c / dc);
  }
  return from_terms(std::move(out));
}

std::string SymExpr::str() const {
  if (terms_.empty()) return "0";
  // Highest-degree terms first, the constant last.
  std::vector<std::pair<Monomial, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string s;
  bool first = true;
  for (const auto& [m, c] : ordered) {
    // Magnitude and sign apart (the magnitude of INT64_MIN is no int64_t).
    const bool negative = c < 0;
    const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    if (!first) s += negative ? " - " : " + ";
    const std::string sign = first && negative ? "-" : "";
    first = false;
    std::string mono;
    for (const auto& sym : m) mono += (mono.empty() ? "" : "*") + sym;
    if (mono.empty())
      s += sign + std::to_string(magnitude);
    else if (magnitude == 1)
      s += sign + mono;
    else
      s += sign + std::to_string(magnitude) + "*" + mono;
  }
  return s;
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  SymExpr r = a;
  for (const auto& [m, c] : b.terms_) {
    int64_t& t = r.terms_[m];
    t = add(t, c);
  }
  r.normalize();
  return r;
}

SymExpr SymExpr::operator-() const {
  SymExpr r = *this;
  for (auto& [m, c] : r.terms_) c = mul(c, -1);
  return r;
}

SymExpr operator-(const SymExpr& a, const SymExpr& b) { return a + (-b); }

SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  SymExpr r;
  check_size(a.terms_.size() * b.terms_.size(), 0);
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      check_size(0, ma.size() + mb.size());
      SymExpr::Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      int64_t& t = r.terms_[m];
      t = add(t, mul(ca, cb));
    }
  }
  r.normalize();
  return r;
}

SymExpr numel(const Shape& shape) {
  SymExpr n(1);
  for (const auto& d : shape) n = n * d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

std::vector<int64_t> concrete_dims(const Shape& shape) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const auto& d : shape) {
    auto c = d.try_constant();
    if (!c)
      throw ShapeError("shape " + shape_str(shape) + " has symbolic dimension '" + d.str() +
                       "' where concrete sizes are required");
    out.push_back(*c);
  }
  return out;
}

std::vector<int64_t> evaluate_dims(const Shape& shape, const SymBindings& bindings) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const auto& d : shape) out.push_back(d.evaluate(bindings));
  return out;
}

Shape shape_of(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

}  // namespace npucache
