// hiredis, wrapped once: an RAII connection whose every command is bounded
// by a deadline. hiredis formats the commands; the replies are parsed by a
// reader that never allocates for what has not arrived (resp_reader.h); the
// connection owns a non-blocking socket polled against the deadline, so no
// call outlives its timeout however the server behaves (stopped, dripping
// bytes, never answering), and writes use MSG_NOSIGNAL, so a closed socket
// never raises SIGPIPE in the process.
//
// Errors: a RedisError with its Failure kind (refused, timeout, auth,
// dropped; server for an error reply during the handshake). After a
// RedisError the connection is unusable (replies may be in flight) and
// must be dropped. Error replies of commands are replies, not errors.
//
// Thread safety: none; one thread at a time (RedisBackend locks).
#pragma once

#include "remote/backend.h"
#include "remote/config.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::remote {

class RedisError : public std::runtime_error {
 public:
  RedisError(Failure kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Failure kind() const { return kind_; }

 private:
  Failure kind_;
};

// A reply, built by the bounded reader (resp_reader.h) straight into C++
// objects: a bulk string is copied once out of the reader's buffer, and
// take_text() moves it out without another copy.
class Reply {
 public:
  enum class Type { string, array, integer, nil, status, error };
  struct Node;
  explicit Reply(Node* n);
  ~Reply();
  Reply(Reply&&) noexcept;
  Reply& operator=(Reply&&) noexcept;
  Type type() const;
  std::string_view text() const;  // string, status, error
  std::string take_text();        // the string, moved out
  long long integer() const;
  std::size_t size() const;  // array elements
  // Element i of an array, borrowed.
  Type type_at(std::size_t i) const;
  std::string_view text_at(std::size_t i) const;
  std::string take_text_at(std::size_t i);
  long long integer_at(std::size_t i) const;
  // Element i of an array (a nested array), moved out.
  Reply take_at(std::size_t i);

 private:
  std::unique_ptr<Node> n_;
};

// What a reply may hold. A value is at most max-object bytes; the slack
// covers the value's envelope and an error reply's text.
inline constexpr std::size_t kReplySlackBytes = kValueSlackBytes;
struct ReplyLimits {
  std::size_t max_string = kDefaultMaxObjectBytes + kReplySlackBytes;
  // The longest array a command of the backend is answered with: a SCAN
  // page (COUNT 1000 returns about a thousand keys, a few more when hash
  // buckets chain).
  std::size_t max_elements = std::size_t{1} << 16;
  int max_depth = 4;  // SCAN's reply is two deep
};

using Command = std::vector<std::string_view>;

class RedisConnection {
 public:
  // Connects within `connect_timeout_s`, then authenticates and selects the
  // database within `timeout_s`. Replies beyond `limits` are protocol
  // violations (resp_reader.h).
  RedisConnection(const Endpoint& e, double connect_timeout_s, double timeout_s, ReplyLimits limits = {});
  ~RedisConnection();
  RedisConnection(RedisConnection&&) noexcept;
  RedisConnection& operator=(RedisConnection&&) noexcept;

  // Sends the commands in one pipeline and returns their replies, all
  // within `timeout_s`.
  std::vector<Reply> run(const std::vector<Command>& commands, double timeout_s);
  Reply run1(const Command& command, double timeout_s) { return std::move(run({command}, timeout_s).front()); }

 private:
  struct State;  // the socket and hiredis's reply reader
  std::unique_ptr<State> s_;
};

}  // namespace npucache::remote
