// Node attributes: a small ordered map from name to a typed value.
//
// Keys are kept sorted, so iteration (printing, hashing, serialization) is
// deterministic whatever order attributes were set in.
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <npucache/ir/dtype.h>
#include <npucache/ir/symbolic.h>

namespace npucache {

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<SymExpr>, DType>;

class NPUCACHE_API Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);

  Attrs& set(const std::string& key, AttrValue value);
  // A copy with `key` set to `value` (the other values copied, the old
  // value of `key` not): one allocation for the items.
  Attrs with(const std::string& key, AttrValue value) const;
  bool has(const std::string& key) const;
  const AttrValue* find(const std::string& key) const;

  // Typed access; throws ShapeError naming the key when missing or of
  // another type.
  template <class T>
  const T& get(const std::string& key) const;
  int64_t get_int(const std::string& key) const { return get<int64_t>(key); }
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_double_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  friend bool operator==(const Attrs& a, const Attrs& b) { return a.items_ == b.items_; }

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// "1.5", "[0, 2, 1]", "f32", "'tp'"...
NPUCACHE_API std::string attr_str(const AttrValue& v);

[[noreturn]] NPUCACHE_API void throw_attr_error(const std::string& key, const char* why);

// inline: compiled where it is used, never an exported instantiation.
template <class T>
inline const T& Attrs::get(const std::string& key) const {
  const AttrValue* v = find(key);
  if (v == nullptr) throw_attr_error(key, "is missing");
  const T* p = std::get_if<T>(v);
  if (p == nullptr) throw_attr_error(key, "has the wrong type");
  return *p;
}

}  // namespace npucache
