// The remote tier's storage: keys to bytes, nothing more (as ccache's
// remote storage). What the bytes mean, how they are checked and where
// they go is the cache layer's (cache/remote_tier.h).
//
// Every call returns one of three answers: a hit (the value), a miss (the
// key holds nothing), or a failure with its kind. A failure is never an
// exception: a remote that is refused, slow, full, behind a wrong password
// or drops the connection must never fail a job. Once a connection-level
// failure happened (refused, timeout, auth, dropped), the backend answers
// every later call with that failure at once, without touching the network
// again: a job pays a remote's timeout once, not once per call.
//
// Thread safety: a Backend may be called from several threads (calls are
// serialised on its one connection).
#pragma once

#include "remote/config.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace npucache::remote {

enum class Failure {
  refused,    // no connection: refused, unreachable, no such socket, name unknown
  timeout,    // the connect timeout or the operation timeout passed
  auth,       // wrong or missing password (NOAUTH, WRONGPASS)
  full,       // the server refused a write for lack of memory (maxmemory, noeviction)
  dropped,    // the connection closed mid-command
  server,     // another error reply (READONLY replica, LOADING, wrong type...)
  corrupt,    // a value failed its checks (cache layer)
  too_large,  // an object above max-object, not sent (cache layer)
};
inline constexpr int kFailureKinds = 8;
std::string_view failure_name(Failure f);

struct Fault {
  Failure kind = Failure::server;
  std::string detail;     // what the server or the system said
  bool repeated = false;  // the remote was skipped: an earlier call failed so (already reported)
};

// A hit (T), a miss, or a failure.
template <class T>
class Answer {
 public:
  static Answer hit(T v) { return Answer(std::move(v)); }
  static Answer miss() { return Answer(std::monostate{}); }
  static Answer failed(Fault f) { return Answer(std::move(f)); }
  bool is_hit() const { return v_.index() == 1; }
  bool is_miss() const { return v_.index() == 0; }
  bool is_failure() const { return v_.index() == 2; }
  T& value() { return std::get<1>(v_); }
  const T& value() const { return std::get<1>(v_); }
  const Fault& fault() const { return std::get<2>(v_); }

 private:
  template <class V>
  explicit Answer(V v) : v_(std::move(v)) {}
  std::variant<std::monostate, T, Fault> v_;
};

// Whether a write may replace what a key holds.
enum class Overwrite { no, yes };

using Fields = std::vector<std::pair<std::string, std::string>>;

class Backend {
 public:
  virtual ~Backend() = default;
  const Config& config() const { return config_; }

  virtual Answer<std::string> get(const std::string& key) = 0;
  // Pipelined gets: one answer per key (a failure fails the rest).
  virtual std::vector<Answer<std::string>> get_many(const std::vector<std::string>& keys) = 0;
  // Hit true: written; hit false: the key existed and Overwrite::no kept it.
  virtual Answer<bool> put(const std::string& key, std::string_view value, Overwrite overwrite) = 0;
  // A value and the value it names: `key`'s value, and the value of
  // `prefix` + the `len` bytes of that value at offset `at` (which must be
  // lowercase hex), in one round trip where the server can, else two. A
  // miss when `key` holds nothing; `target` is empty when the named key
  // holds nothing or the bytes are no name. The caller checks both values.
  struct Referenced {
    std::string value;
    std::optional<std::string> target;
  };
  virtual Answer<Referenced> get_referenced(const std::string& key, std::size_t at, std::size_t len,
                                            const std::string& prefix) = 0;
  virtual Answer<std::string> hash_get(const std::string& key, const std::string& field) = 0;
  // Every field of a hash (a miss when there is none).
  virtual Answer<Fields> hash_all(const std::string& key) = 0;
  // Hit: the number of fields written (Overwrite::no keeps existing ones).
  virtual Answer<std::size_t> hash_put(const std::string& key, const Fields& fields, Overwrite overwrite) = 0;
  virtual Answer<bool> set_add(const std::string& key, const std::string& member) = 0;
  virtual Answer<std::vector<std::string>> set_members(const std::string& key) = 0;
  // Bytes each key's string value holds (0 for none), pipelined.
  virtual Answer<std::vector<std::size_t>> sizes(const std::vector<std::string>& keys) = 0;
  // Removes keys (administration and tests).
  virtual Answer<std::size_t> remove(const std::vector<std::string>& keys) = 0;

 protected:
  explicit Backend(Config config) : config_(std::move(config)) {}

 private:
  Config config_;
};

// A Redis backend for `config`: connects on its first call, never before.
std::unique_ptr<Backend> make_redis_backend(const Config& config);

}  // namespace npucache::remote
