#include <npucache/error.h>
#include <npucache/ir/attrs.h>

#include <algorithm>
#include <sstream>

namespace npucache {

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) {
  for (const auto& [k, v] : items) set(k, v);
}

Attrs& Attrs::set(const std::string& key, AttrValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& item, const std::string& k) { return item.first < k; });
  if (it != items_.end() && it->first == key)
    it->second = std::move(value);
  else
    items_.insert(it, {key, std::move(value)});
  return *this;
}

Attrs Attrs::with(const std::string& key, AttrValue value) const {
  Attrs out;
  out.items_.reserve(items_.size() + 1);
  bool placed = false;
  for (const auto& item : items_) {
    if (!placed && !(item.first < key)) {
      out.items_.emplace_back(key, std::move(value));
      placed = true;
      if (item.first == key) continue;
    }
    out.items_.push_back(item);
  }
  if (!placed) out.items_.emplace_back(key, std::move(value));
  return out;
}

const AttrValue* Attrs::find(const std::string& key) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& item, const std::string& k) { return item.first < k; });
  return (it != items_.end() && it->first == key) ? &it->second : nullptr;
}

bool Attrs::has(const std::string& key) const { return find(key) != nullptr; }

int64_t Attrs::get_int_or(const std::string& key, int64_t fallback) const {
  return has(key) ? get<int64_t>(key) : fallback;
}
double Attrs::get_double_or(const std::string& key, double fallback) const {
  return has(key) ? get<double>(key) : fallback;
}
bool Attrs::get_bool_or(const std::string& key, bool fallback) const { return has(key) ? get<bool>(key) : fallback; }

void throw_attr_error(const std::string& key, const char* why) { throw ShapeError("attribute '" + key + "' " + why); }

namespace {
std::string double_str(double d) {
  std::ostringstream os;
  os.precision(17);
  os << d;
  return os.str();
}
}  // namespace

std::string attr_str(const AttrValue& v) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return double_str(d); }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string s = "[";
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<SymExpr>& v) const { return shape_str(v); }
    std::string operator()(DType t) const { return std::string(dtype_name(t)); }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace npucache
