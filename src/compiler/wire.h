// A small bounded binary encoding for npucache's own data (compiled
// artifacts, index records, bundles): little-endian integers, doubles,
// length-prefixed strings and lists. ByteReader never reads past its input
// and never allocates more than the input could hold: a length or count
// that claims more bytes than remain is an Error naming `what`, so damaged
// or hostile bytes cannot make it crash or exhaust memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::compiler {

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void str(std::string_view s);
  void strings(const std::vector<std::string>& v);
  void bytes(std::string_view b) { out_.append(b.data(), b.size()); }
  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void raw(const void* p, std::size_t n);  // little-endian hosts (x86-64, aarch64)
  std::string out_;
};

class ByteReader {
 public:
  ByteReader(std::string_view in, std::string what) : in_(in), what_(std::move(what)) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  int64_t i64();
  double f64();
  std::string str();
  std::vector<std::string> strings();
  std::string_view bytes(std::size_t n);
  // A count of items each taking at least `min_item_bytes`: rejected when
  // the remaining input could not hold them.
  std::size_t count(std::size_t min_item_bytes);
  std::size_t remaining() const { return in_.size() - at_; }
  bool done() const { return at_ == in_.size(); }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  void raw(void* p, std::size_t n);
  std::string_view in_;
  std::size_t at_ = 0;
  std::string what_;
};

}  // namespace npucache::compiler
