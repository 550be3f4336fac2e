#include <npucache/error.h>
#include <npucache/ir/dtype.h>

namespace npucache {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  throw Error("dtype_size: invalid dtype value");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "invalid";
}

DType dtype_from_name(std::string_view name) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean})
    if (dtype_name(t) == name) return t;
  throw ConfigError("unknown dtype '" + std::string(name) + "'; expected one of f32, f16, bf16, i32, i64, bool");
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

}  // namespace npucache
