// The Redis protocol's replies (RESP2), read with bounds: a server, or
// whatever listens on the remote's port, announces sizes the client never
// trusts. Nothing is allocated for a reply before all its bytes arrived, so
// memory follows what was received, never what was announced. A string
// longer than `max_string` bytes is a value too large for this reader
// (RedisError too_large, naming the announced size: the connection is
// closed and the next call opens another; the remote is not judged down,
// since another writer may use a larger max-object). A status or error
// line longer than 64 KiB, an array of more than `max_elements` elements
// or nested deeper than `max_depth`, a negative length other than -1
// (nil), a length or integer that is not a number, or an unknown type byte
// is a protocol violation (RedisError dropped, naming the announced size).
// Each is caught as soon as its header arrives.
//
// Thread safety: none; one per connection.
#pragma once

#include "remote/config.h"
#include "remote/redis.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace npucache::remote {

struct Reply::Node {
  Type type = Type::nil;
  std::string str;
  long long integer = 0;
  std::vector<std::unique_ptr<Node>> elements;
};

class RespReader {
 public:
  explicit RespReader(ReplyLimits limits = {}) : limits_(limits) {}

  // Appends received bytes.
  void feed(const char* data, std::size_t n) { buf_.append(data, n); }
  // The next reply when all of it arrived, else null. Throws RedisError
  // (dropped) on a protocol violation; the reader is then unusable.
  std::unique_ptr<Reply::Node> next();
  // Bytes received and not yet returned as replies.
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  // Where the reply starting at `at` ends, or npos when it has not all
  // arrived (nothing is allocated).
  std::size_t measure(std::size_t at, int depth) const;
  // The reply at `at` (which measure() found complete), moving `at` past it.
  std::unique_ptr<Reply::Node> build(std::size_t& at) const;
  // The header line's number starting at `at` (after the type byte), and
  // where the line ends; npos when the line has not all arrived.
  std::size_t header(std::size_t at, long long* value) const;
  std::size_t line_end(std::size_t at, std::size_t max_line) const;

  ReplyLimits limits_;
  std::string buf_;
  std::size_t pos_ = 0;
};

}  // namespace npucache::remote
