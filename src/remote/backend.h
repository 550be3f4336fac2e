// The remote tier's storage: keys to bytes, nothing more (as ccache's
// remote storage). What the bytes mean, how they are checked and where
// they go is the cache layer's (storage/remote_tier.h). A backend is one
// file (redis_backend.cpp, file_backend.cpp) and one line of the factory
// (factory.cpp), chosen by the URL's scheme (config.h).
//
// The seam is get, get_many, put and remove, which every key-value store
// has (Redis, a shared directory, an HTTP or S3-style object store), and
// one listing primitive, keys by prefix, for what is read as a table: the
// administration commands (`npucache remote ls/pull` list a model's
// entries) and the shared tables read before a compile (tuning decisions,
// dynamic-shape profiles). A warm read never lists: it gets a key it
// computes. No call relies on server-side scripting or on two keys living
// on one server, so keys may be spread over several servers.
//
// Every call returns one of three answers: a hit (the value), a miss (the
// key holds nothing), or a failure with its kind. A failure is never an
// exception: a remote that is refused, slow, full, behind a wrong password
// or drops the connection must never fail a job. Once a connection-level
// failure happened (refused, timeout, auth, dropped), the backend answers
// every later call with that failure at once, without touching the network
// again: a job pays a remote's timeout once, not once per call.
//
// Thread safety: a Backend may be called from several threads.
#pragma once

#include "remote/config.h"

#include <memory>
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
  dropped,    // the connection closed mid-command, or the reply was not Redis protocol (closed by the client)
  server,     // another error reply (READONLY replica, LOADING, wrong type...)
  corrupt,    // a value failed its checks (cache layer)
  too_large,  // an object above max-object, not sent (cache layer)
  untrusted,  // a value not signed by a trusted key (signed_backend.h); the detail says why
};
inline constexpr int kFailureKinds = 9;
std::string_view failure_name(Failure f);

struct Fault {
  Failure kind = Failure::server;
  std::string detail;      // what the server or the system said
  bool repeated = false;   // the remote was skipped: an earlier call failed so (already reported)
  std::string shard = {};  // of a sharded tier: the failed shard's URL as shown (sharded_backend.h)
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

class Backend {
 public:
  virtual ~Backend() = default;
  const Config& config() const { return config_; }

  virtual Answer<std::string> get(const std::string& key) = 0;
  // Batched gets, in one round trip where the store can: one answer per
  // key (a connection failure fails the rest).
  virtual std::vector<Answer<std::string>> get_many(const std::vector<std::string>& keys) = 0;
  // Hit true: written; hit false: the key held a value and Overwrite::no
  // kept it. A reader sees the old value or the new one, never a part.
  virtual Answer<bool> put(const std::string& key, std::string_view value, Overwrite overwrite) = 0;
  // Removes keys (a damaged value, administration, tests); hit: how many
  // held a value.
  virtual Answer<std::size_t> remove(const std::vector<std::string>& keys) = 0;
  // Every key starting with `prefix`, in no particular order (a miss is an
  // empty list). Keys written or removed meanwhile may or may not show.
  virtual Answer<std::vector<std::string>> list(const std::string& prefix) = 0;
  // Whether every value this backend answers was signed by a trusted key
  // (signed_backend.h). Only then does the code_version fast path take a
  // remote entry (an unsigned one is a claim of whoever can write the
  // remote); the mix-up checks (cache/own_key.h) apply either way.
  virtual bool authenticated() const { return false; }
  // The failures the calling thread's last calls answered around instead
  // of failing (a sharded list leaving out a failed shard's keys), for the
  // caller to count; taking them clears them. None by default.
  virtual std::vector<Fault> take_partial_faults() { return {}; }
  // The backend this one decorates (the signing layer's), else null: what
  // administration walks to reach the servers (`remote ls` per shard).
  virtual Backend* wrapped() { return nullptr; }

 protected:
  explicit Backend(Config config) : config_(std::move(config)) {}

 private:
  Config config_;
};

// The backend of `config`'s scheme (backend.cpp), signed and checked when
// a signing key or trusted keys are set (signed_backend.h): nothing is
// touched before its first call.
std::unique_ptr<Backend> make_backend(const Config& config);
// The same without the signing layer: one backend of the scheme, or one
// ShardedBackend over one such backend per shard (the signing layer wraps
// the whole tier once, so a value and its signature share a shard).
std::unique_ptr<Backend> make_unsigned_backend(const Config& config);
// Each backend's maker (its own file).
std::unique_ptr<Backend> make_redis_backend(const Config& config);
std::unique_ptr<Backend> make_file_backend(const Config& config);

}  // namespace npucache::remote
