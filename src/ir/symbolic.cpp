#include <npucache/error.h>
#include <npucache/ir/symbolic.h>

#include <algorithm>

namespace npucache {

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
    Monomial sorted = m;
    std::sort(sorted.begin(), sorted.end());
    e.terms_[sorted] += c;
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

bool SymExpr::is_constant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

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
        throw ShapeError("unknown symbol '" + s + "' in dimension '" + str() +
                         "': no value is bound to it");
      v *= it->second;
    }
    total += v;
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
    if (c % dc != 0) return std::nullopt;
    Monomial rest = m;
    for (const auto& s : dm) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    out[rest] += c / dc;
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
    int64_t coeff = c;
    if (!first) {
      s += coeff < 0 ? " - " : " + ";
      coeff = coeff < 0 ? -coeff : coeff;
    }
    first = false;
    std::string mono;
    for (const auto& sym : m) mono += (mono.empty() ? "" : "*") + sym;
    if (mono.empty())
      s += std::to_string(coeff);
    else if (coeff == 1)
      s += mono;
    else if (coeff == -1)
      s += "-" + mono;
    else
      s += std::to_string(coeff) + "*" + mono;
  }
  return s;
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  SymExpr r = a;
  for (const auto& [m, c] : b.terms_) r.terms_[m] += c;
  r.normalize();
  return r;
}

SymExpr SymExpr::operator-() const {
  SymExpr r = *this;
  for (auto& [m, c] : r.terms_) c = -c;
  return r;
}

SymExpr operator-(const SymExpr& a, const SymExpr& b) { return a + (-b); }

SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  SymExpr r;
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      SymExpr::Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      r.terms_[m] += ca * cb;
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
    if (!c) throw ShapeError("shape " + shape_str(shape) + " has symbolic dimension '" + d.str() +
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
