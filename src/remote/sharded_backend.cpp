#include "remote/sharded_backend.h"

#include <xxhash.h>

#include <atomic>
#include <exception>
#include <functional>
#include <system_error>
#include <thread>
#include <utility>

namespace npucache::remote {
namespace {

constexpr std::string_view kSignatureSuffix = "#sig";

// Runs work(0..n-1): the first on the calling thread, the others on a
// thread each (one round trip of waiting for n shards); in turn when no
// thread can be made.
void at_once(std::size_t n, const std::function<void(std::size_t)>& work) {
  if (n == 0) return;
  std::vector<std::thread> threads;
  std::size_t i = 1;
  try {
    for (; i < n; ++i) threads.emplace_back(work, i);
  } catch (const std::system_error&) {
  }
  work(0);
  for (std::size_t j = i; j < n; ++j) work(j);
  for (auto& t : threads) t.join();
}

// The faults each thread's calls answered around, by backend.
thread_local std::vector<std::pair<const Backend*, Fault>> t_partial;

}  // namespace

std::string shard_identity(const Config& c) {
  const Endpoint& e = c.endpoint;
  if (c.scheme == Scheme::file) return "file://" + e.path;
  if (e.unix_socket) return "redis+unix://" + e.path + "/" + std::to_string(e.db);
  return "redis://" + e.host + ":" + std::to_string(e.port) + "/" + std::to_string(e.db);
}

uint64_t shard_seed(std::string_view identity) { return XXH3_64bits(identity.data(), identity.size()); }

std::string_view placed_key(std::string_view key) {
  if (key.size() > kSignatureSuffix.size() && key.substr(key.size() - kSignatureSuffix.size()) == kSignatureSuffix)
    key.remove_suffix(kSignatureSuffix.size());
  return key;
}

std::size_t place(std::string_view key, const std::vector<uint64_t>& seeds) {
  const std::string_view k = placed_key(key);
  std::size_t best = 0;
  uint64_t best_weight = 0;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const uint64_t w = XXH3_64bits_withSeed(k.data(), k.size(), seeds[i]);
    if (i == 0 || w > best_weight) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

struct ShardedBackend::Shard {
  std::unique_ptr<Backend> backend;
  std::string url;                // as shown
  std::atomic<bool> full{false};  // a write found it full: no more writes to it
};

ShardedBackend::ShardedBackend(const Config& config, std::vector<std::unique_ptr<Backend>> shards) : Backend(config) {
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto s = std::make_unique<Shard>();
    s->url = shards[i]->config().url;
    seeds_.push_back(shard_seed(shard_identity(shards[i]->config())));
    s->backend = std::move(shards[i]);
    shards_.push_back(std::move(s));
  }
}

ShardedBackend::~ShardedBackend() = default;

Backend& ShardedBackend::shard(std::size_t i) { return *shards_[i]->backend; }

Fault ShardedBackend::named(std::size_t i, Fault f) const {
  f.shard = shards_[i]->url;
  return f;
}

Answer<std::string> ShardedBackend::get(const std::string& key) {
  const std::size_t i = shard_of(key);
  auto a = shards_[i]->backend->get(key);
  return a.is_failure() ? Answer<std::string>::failed(named(i, a.fault())) : a;
}

std::vector<Answer<std::string>> ShardedBackend::get_many(const std::vector<std::string>& keys) {
  std::vector<std::vector<std::size_t>> of(shards_.size());  // shard -> indices into keys
  for (std::size_t k = 0; k < keys.size(); ++k) of[shard_of(keys[k])].push_back(k);
  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < of.size(); ++i)
    if (!of[i].empty()) used.push_back(i);
  std::vector<std::vector<Answer<std::string>>> got(shards_.size());
  at_once(used.size(), [&](std::size_t u) {
    const std::size_t i = used[u];
    try {  // on a thread of its own: nothing may escape it
      std::vector<std::string> batch;
      for (std::size_t k : of[i]) batch.push_back(keys[k]);
      got[i] = shards_[i]->backend->get_many(batch);
    } catch (const std::exception& e) {  // e.g. out of memory: each of the shard's keys failed
      got[i].assign(of[i].size(),
                    Answer<std::string>::failed(
                        {Failure::dropped, std::string("its batch failed in this process: ") + e.what()}));
    }
    if (got[i].size() != of[i].size())  // answers missing: each of the shard's keys failed
      got[i].assign(of[i].size(), Answer<std::string>::failed({Failure::dropped, "its batch lost answers"}));
  });
  std::vector<Answer<std::string>> out(keys.size(), Answer<std::string>::miss());
  for (std::size_t i : used)
    for (std::size_t j = 0; j < of[i].size(); ++j) {
      Answer<std::string>& a = got[i][j];
      out[of[i][j]] = a.is_failure() ? Answer<std::string>::failed(named(i, a.fault())) : std::move(a);
    }
  return out;
}

Answer<bool> ShardedBackend::put(const std::string& key, std::string_view value, Overwrite overwrite) {
  const std::size_t i = shard_of(key);
  Shard& s = *shards_[i];
  if (s.full) return Answer<bool>::failed(named(i, {Failure::full, "an earlier write found it full", true}));
  auto a = s.backend->put(key, value, overwrite);
  if (!a.is_failure()) return a;
  if (a.fault().kind == Failure::full) s.full = true;
  return Answer<bool>::failed(named(i, a.fault()));
}

Answer<std::size_t> ShardedBackend::remove(const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> of(shards_.size());
  for (const auto& k : keys) of[shard_of(k)].push_back(k);
  std::size_t removed = 0;
  for (std::size_t i = 0; i < of.size(); ++i) {
    if (of[i].empty()) continue;
    auto a = shards_[i]->backend->remove(of[i]);
    if (a.is_failure()) return Answer<std::size_t>::failed(named(i, a.fault()));
    removed += a.value();
  }
  return Answer<std::size_t>::hit(removed);
}

Answer<std::vector<std::string>> ShardedBackend::list(const std::string& prefix) {
  std::vector<Answer<std::vector<std::string>>> got(shards_.size(), Answer<std::vector<std::string>>::miss());
  at_once(shards_.size(), [&](std::size_t i) {
    try {  // on a thread of its own: nothing may escape it
      got[i] = shards_[i]->backend->list(prefix);
    } catch (const std::exception& e) {
      got[i] = Answer<std::vector<std::string>>::failed({Failure::dropped, std::string("listing failed: ") + e.what()});
    }
  });
  std::vector<std::string> keys;
  std::vector<Fault> faults;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].is_failure())
      faults.push_back(named(i, got[i].fault()));
    else if (got[i].is_hit())
      for (auto& k : got[i].value()) keys.push_back(std::move(k));
  }
  if (faults.size() == shards_.size()) return Answer<std::vector<std::string>>::failed(faults.front());
  for (auto& f : faults) t_partial.emplace_back(this, std::move(f));
  return Answer<std::vector<std::string>>::hit(std::move(keys));
}

std::vector<Fault> ShardedBackend::take_partial_faults() {
  std::vector<Fault> mine;
  std::vector<std::pair<const Backend*, Fault>> others;
  for (auto& [b, f] : t_partial) {
    if (b == this)
      mine.push_back(std::move(f));
    else
      others.emplace_back(b, std::move(f));
  }
  t_partial.swap(others);
  return mine;
}

std::unique_ptr<Backend> make_sharded_backend(const Config& config) {
  std::vector<std::unique_ptr<Backend>> shards;
  for (const Config& c : config.shards) shards.push_back(make_unsigned_backend(c));
  return std::make_unique<ShardedBackend>(config, std::move(shards));
}

}  // namespace npucache::remote
