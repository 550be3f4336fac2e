// Element types of tensors.
//
// f16 and bf16 are storage types: kernels load them into f32, compute in f32
// and round back on store. bool is stored as one byte (0 or 1).
#pragma once

#include <npucache/export.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace npucache {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, boolean };

// Bytes per element.
NPUCACHE_API std::size_t dtype_size(DType t);
// "f32", "f16", "bf16", "i32", "i64", "bool".
NPUCACHE_API std::string_view dtype_name(DType t);
// Inverse of dtype_name; throws ConfigError naming the unknown string.
NPUCACHE_API DType dtype_from_name(std::string_view name);
NPUCACHE_API bool is_floating(DType t);
NPUCACHE_API bool is_integral(DType t);  // i32, i64 (not bool)

}  // namespace npucache
