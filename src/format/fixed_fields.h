// Fixed-width fields at known offsets of a header: the bundle's, the
// envelope's and the remote value's. Little-endian hosts only (x86-64,
// aarch64), as compiler/wire.h. get_le does not check bounds: callers check
// the header's size before they read a field.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace npucache::cache {

// Appends `v`'s bytes to `s`.
template <class T>
void put_le(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  s.append(b, sizeof b);
}

// The T stored at byte `at` of `s`.
template <class T>
T get_le(std::string_view s, std::size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}

}  // namespace npucache::cache
