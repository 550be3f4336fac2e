#include "remote/resp_reader.h"

#include <charconv>
#include <cstdio>
#include <string_view>

namespace npucache::remote {
namespace {

constexpr std::size_t npos = std::string::npos;
// ":-9223372036854775808": a number's line is short; a longer one is garbage.
constexpr std::size_t kMaxNumberLine = 24;
// A status or error line: Redis's are a few words (OK, WRONGPASS ..., OOM ...).
constexpr std::size_t kMaxSimpleLine = std::size_t{64} << 10;

[[noreturn]] void violation(const std::string& what) {
  throw RedisError(Failure::dropped,
                   "the reply is not Redis protocol (" + what + "); is a Redis server listening on the remote's port?");
}

}  // namespace

std::size_t RespReader::line_end(std::size_t at, std::size_t max_line) const {
  const std::size_t avail = buf_.size() - at;
  const std::size_t look = avail < max_line + 2 ? avail : max_line + 2;
  const std::size_t cr = std::string_view(buf_).substr(at, look).find("\r\n");
  if (cr != npos) return at + cr;
  if (avail >= max_line + 2) violation("a header line longer than " + std::to_string(max_line) + " bytes");
  return npos;
}

std::size_t RespReader::header(std::size_t at, long long* value) const {
  const std::size_t end = line_end(at, kMaxNumberLine);
  if (end == npos) return npos;
  const char* b = buf_.data() + at;
  const char* e = buf_.data() + end;
  const auto [p, ec] = std::from_chars(b, e, *value);
  if (b == e || ec != std::errc() || p != e)
    violation("the number '" + std::string(b, static_cast<std::size_t>(std::min<long>(e - b, 24))) +
              "' is not a whole number");
  return end;
}

std::size_t RespReader::measure(std::size_t at, int depth) const {
  if (at >= buf_.size()) return npos;
  const char type = buf_[at];
  long long n = 0;
  switch (type) {
    case '+':
    case '-': {
      const std::size_t end = line_end(at + 1, kMaxSimpleLine);
      return end == npos ? npos : end + 2;
    }
    case ':': {
      const std::size_t end = header(at + 1, &n);
      return end == npos ? npos : end + 2;
    }
    case '$': {
      const std::size_t end = header(at + 1, &n);
      if (end == npos) return npos;
      if (n == -1) return end + 2;
      if (n < 0) violation("a string of length " + std::to_string(n));
      if (static_cast<unsigned long long>(n) > limits_.max_string)  // a value, not the protocol, is at fault
        throw RedisError(Failure::too_large,
                         "a string of " + std::to_string(n) + " bytes announced, more than the " +
                             std::to_string(limits_.max_string) +
                             " a reply may hold (max-object and its slack); that value is not read");
      const std::size_t stop = end + 2 + static_cast<std::size_t>(n) + 2;
      if (stop > buf_.size()) return npos;
      if (buf_[stop - 2] != '\r' || buf_[stop - 1] != '\n') violation("a string not ended by CRLF");
      return stop;
    }
    case '*': {
      const std::size_t end = header(at + 1, &n);
      if (end == npos) return npos;
      if (n == -1) return end + 2;
      if (n < 0) violation("an array of length " + std::to_string(n));
      if (static_cast<unsigned long long>(n) > limits_.max_elements)
        violation("an array of " + std::to_string(n) + " elements announced, more than the " +
                  std::to_string(limits_.max_elements) + " a reply may hold");
      if (n > 0 && depth >= limits_.max_depth)
        violation("arrays nested deeper than " + std::to_string(limits_.max_depth));
      std::size_t next = end + 2;
      for (long long i = 0; i < n; ++i) {
        next = measure(next, depth + 1);
        if (next == npos) return npos;
      }
      return next;
    }
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(type));
      violation(std::string("the type byte ") + hex);
    }
  }
}

std::unique_ptr<Reply::Node> RespReader::build(std::size_t& at) const {
  auto node = std::make_unique<Reply::Node>();
  const char type = buf_[at];
  long long n = 0;
  if (type == '+' || type == '-') {
    const std::size_t end = buf_.find("\r\n", at + 1);
    node->type = type == '+' ? Reply::Type::status : Reply::Type::error;
    node->str.assign(buf_, at + 1, end - at - 1);
    at = end + 2;
  } else if (type == ':') {
    at = header(at + 1, &n) + 2;
    node->type = Reply::Type::integer;
    node->integer = n;
  } else if (type == '$') {
    at = header(at + 1, &n) + 2;
    if (n >= 0) {
      node->type = Reply::Type::string;
      node->str.assign(buf_, at, static_cast<std::size_t>(n));
      at += static_cast<std::size_t>(n) + 2;
    }
  } else {  // '*': every element arrived (measure), so reserving is bounded by the bytes received
    at = header(at + 1, &n) + 2;
    if (n >= 0) {
      node->type = Reply::Type::array;
      node->elements.reserve(static_cast<std::size_t>(n));
      for (long long i = 0; i < n; ++i) node->elements.push_back(build(at));
    }
  }
  return node;
}

std::unique_ptr<Reply::Node> RespReader::next() {
  if (measure(pos_, 0) == npos) return nullptr;
  auto reply = build(pos_);
  if (pos_ == buf_.size()) {
    buf_.clear();  // the capacity stays: the next large value is read into it again
    pos_ = 0;
  } else if (pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return reply;
}

}  // namespace npucache::remote
