// Several servers forming one tier (a setting of several URLs, config.h:
// parse_remote): a Backend that places each key on one shard, each shard
// its own backend of its URL's scheme.
//
// Placement is rendezvous (highest-random-weight) hashing, as ccache's
// shards: every shard weighs the key, XXH3-64 of the key seeded with the
// XXH3-64 of the shard's identity (scheme, host, port or path, db; never
// the password, the timeouts or the attributes' order), and the heaviest
// holds it. Adding a shard moves only the keys it now outweighs (about
// 1/N), removing one moves only its own; every host that names the shards
// the same way places every key the same way, whatever the URLs' order.
// A signature record `K#sig` is placed as `K`, so a value and its
// signature live on one shard (docs/FORMAT.md, "Shards").
//
// Each call touches only the shards of its keys: get one round trip to
// one shard, get_many one batch per shard (sent at once from one thread
// per shard, the answers in the keys' order), put and remove the keys'
// shards, list every shard (merged). A shard that fails fails only its
// keys: its faults name it (Fault::shard), each shard keeps the rule of
// its backend (after a connection failure, skipped for the process), a
// shard found full takes no more writes while the others do, and a list
// leaves out a failed shard's keys (take_partial_faults names it) unless
// every shard failed.
//
// Thread safety: as Backend.
#pragma once

#include "remote/backend.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::remote {

// What places keys on a shard: "redis://host:port/db",
// "redis+unix:///path/db" or "file:///path".
std::string shard_identity(const Config& shard);
// The seed of a shard's weights: XXH3-64 of its identity.
uint64_t shard_seed(std::string_view identity);
// The key as placed: `key` without a trailing "#sig".
std::string_view placed_key(std::string_view key);
// The index (into `seeds`) of the shard holding `key`.
std::size_t place(std::string_view key, const std::vector<uint64_t>& seeds);

class ShardedBackend final : public Backend {
 public:
  // `config.shards` and one backend per shard, in the same order.
  ShardedBackend(const Config& config, std::vector<std::unique_ptr<Backend>> shards);
  ~ShardedBackend() override;

  std::size_t shard_count() const { return shards_.size(); }
  Backend& shard(std::size_t i);
  // Which shard holds `key`.
  std::size_t shard_of(std::string_view key) const { return place(key, seeds_); }

  Answer<std::string> get(const std::string& key) override;
  std::vector<Answer<std::string>> get_many(const std::vector<std::string>& keys) override;
  Answer<bool> put(const std::string& key, std::string_view value, Overwrite overwrite) override;
  Answer<std::size_t> remove(const std::vector<std::string>& keys) override;
  Answer<std::vector<std::string>> list(const std::string& prefix) override;
  std::vector<Fault> take_partial_faults() override;

 private:
  struct Shard;
  // The fault of shard `i`, naming it.
  Fault named(std::size_t i, Fault f) const;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<uint64_t> seeds_;
};

// A ShardedBackend over one backend per `config.shards` (make_unsigned_backend).
std::unique_ptr<Backend> make_sharded_backend(const Config& config);

}  // namespace npucache::remote
