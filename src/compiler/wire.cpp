#include "compiler/wire.h"

#include <npucache/error.h>

#include <cstring>

namespace npucache::compiler {

void ByteWriter::raw(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }

void ByteWriter::str(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  out_.append(s.data(), s.size());
}

void ByteWriter::strings(const std::vector<std::string>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) str(s);
}

void ByteReader::fail(const std::string& why) const {
  throw Error(what_ + " is damaged: " + why + " (at byte " + std::to_string(at_) + " of " + std::to_string(in_.size()) +
              ")");
}

void ByteReader::raw(void* p, std::size_t n) {
  if (n > remaining()) fail("it ends early");
  std::memcpy(p, in_.data() + at_, n);
  at_ += n;
}

uint8_t ByteReader::u8() {
  uint8_t v = 0;
  raw(&v, sizeof v);
  return v;
}
uint32_t ByteReader::u32() {
  uint32_t v = 0;
  raw(&v, sizeof v);
  return v;
}
uint64_t ByteReader::u64() {
  uint64_t v = 0;
  raw(&v, sizeof v);
  return v;
}
int64_t ByteReader::i64() {
  int64_t v = 0;
  raw(&v, sizeof v);
  return v;
}
double ByteReader::f64() {
  double v = 0;
  raw(&v, sizeof v);
  return v;
}

std::string_view ByteReader::bytes(std::size_t n) {
  if (n > remaining()) fail("a length of " + std::to_string(n) + " bytes exceeds what remains");
  std::string_view v = in_.substr(at_, n);
  at_ += n;
  return v;
}

std::string ByteReader::str() { return std::string(bytes(u32())); }

std::size_t ByteReader::count(std::size_t min_item_bytes) {
  const uint32_t n = u32();
  if (min_item_bytes > 0 && n > remaining() / min_item_bytes)
    fail("a count of " + std::to_string(n) + " items cannot fit in what remains");
  return n;
}

std::vector<std::string> ByteReader::strings() {
  const std::size_t n = count(sizeof(uint32_t));
  std::vector<std::string> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(str());
  return v;
}

}  // namespace npucache::compiler
