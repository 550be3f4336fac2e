// A tier of several servers (remote/sharded_backend.h): the setting's URL
// list, where keys are placed (stable, a signature with its value, adding
// or removing a shard moves only its share), the decorator's behaviour over
// in-memory shards (answers in the keys' order, one failed or full shard
// fails only its keys), and three real redis-server processes: jobs (cache_worker,
// as users run them) write through the tier, an empty host reads each
// object once from the shard that holds it, and a shard killed mid-job
// makes only its keys misses, named in `npucache stats` and `remote ls`;
// so does a stopped (slow) one, after one timeout.
#include <npucache/error.h>

#include "format/remote_value.h"
#include "remote/backend.h"
#include "remote/config.h"
#include "remote/sharded_backend.h"
#include "storage/remote_tier.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace npucache;
using testing_support::has;
using testing_support::Out;
using testing_support::RedisServer;
using testing_support::sh;

namespace {

std::vector<uint64_t> seeds_of(const std::vector<std::string>& urls) {
  std::vector<uint64_t> out;
  for (const auto& u : urls) out.push_back(remote::shard_seed(remote::shard_identity(remote::parse_url(u))));
  return out;
}

std::string key(int i) { return format::remote_key::object("graph" + std::to_string(i * 7919)); }

std::string error_of(const std::string& setting) {
  try {
    (void)remote::parse_remote(setting);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(ShardSetting, ListsUrlsAndSaysWhatIsWrong) {
  const auto c = remote::parse_remote("redis://a:6379, redis://:p%2Css@b:6380/2?timeout=2s,redis+unix:///run/r.sock");
  ASSERT_EQ(c.shards.size(), 3u);
  EXPECT_EQ(c.shards[1].endpoint.host, "b");
  EXPECT_EQ(c.shards[1].endpoint.password, "p,ss");  // %2C: a comma inside one URL
  EXPECT_EQ(c.shards[1].endpoint.db, 2);
  EXPECT_DOUBLE_EQ(c.shards[1].timeout_s, 2.0);  // timeouts per URL
  EXPECT_DOUBLE_EQ(c.shards[0].timeout_s, remote::kDefaultTimeoutS);
  EXPECT_TRUE(c.shards[2].endpoint.unix_socket);
  EXPECT_EQ(c.url, "redis://a:6379,redis://:***@b:6380/2?timeout=2s,redis+unix:///run/r.sock");
  EXPECT_TRUE(c.password_in_url);
  EXPECT_TRUE(remote::parse_remote("redis://a:1").shards.empty());  // one URL: no shards
  EXPECT_EQ(remote::parse_remote("file:///x,file:///y").shards.size(), 2u);
  // An unescaped comma in a password: the rest is never shown.
  const std::string pw = error_of("redis://:pa,55word@a:1,redis://b:2");
  EXPECT_TRUE(has(pw, "%2C")) << pw;
  EXPECT_FALSE(has(pw, "55word")) << pw;
  EXPECT_TRUE(has(error_of("redis://a:1,b:2"), "not a URL (no scheme)"));
  EXPECT_TRUE(has(error_of("redis://a:1,,redis://b:2"), "is empty"));
  EXPECT_TRUE(has(error_of("redis://a:1,file:///d"), "all Redis servers or all shared directories"));
  EXPECT_TRUE(has(error_of("redis://a:1?read-only,redis://b:1"), "disagree on read-only"));
  EXPECT_TRUE(has(error_of("redis://a:1?max-object=1M,redis://b:1"), "disagree on max-object"));
  EXPECT_TRUE(has(error_of("redis://a:1,redis://:secret@a:1?timeout=1"), "name one server twice"));
  EXPECT_FALSE(has(error_of("redis://a:1,redis://:secret@a:1?timeout=1"), "secret"));
  const std::string bad_shard = error_of("redis://a:1,redis://:secret@b:99999");
  EXPECT_TRUE(has(bad_shard, "port '99999'")) << bad_shard;
  EXPECT_FALSE(has(bad_shard, "secret")) << bad_shard;
}

TEST(ShardPlacement, StableMovesOnlyItsShareSignatureWithValue) {
  // The identity: no password, timeout or attribute order.
  EXPECT_EQ(remote::shard_identity(remote::parse_url("redis://:pw@h:7/1?timeout=3")),
            remote::shard_identity(remote::parse_url("redis://h:7/1")));
  EXPECT_NE(remote::shard_identity(remote::parse_url("redis://h:7/1")),
            remote::shard_identity(remote::parse_url("redis://h:7/2")));
  const std::vector<std::string> three = {"redis://a:6379", "redis://b:6379", "redis://c:6379"};
  const auto s3 = seeds_of(three);
  const auto s4 = seeds_of({"redis://a:6379", "redis://b:6379", "redis://c:6379", "redis://d:6379"});
  const auto s2 = seeds_of({"redis://a:6379", "redis://c:6379"});  // b removed
  const auto reversed = seeds_of({"redis://c:6379", "redis://b:6379", "redis://a:6379"});
  constexpr int kKeys = 10000;
  int moved_by_adding = 0, moved_by_removing = 0;
  std::vector<int> share(3);
  for (int i = 0; i < kKeys; ++i) {
    const std::string k = key(i);
    const std::size_t at = remote::place(k, s3);
    ++share[at];
    EXPECT_EQ(remote::place(k, s3), at);            // stable
    EXPECT_EQ(remote::place(k + "#sig", s3), at);   // a signature lives with its value
    EXPECT_EQ(2 - remote::place(k, reversed), at);  // the URLs' order does not matter
    if (const std::size_t now = remote::place(k, s4); now != at) {
      ++moved_by_adding;
      EXPECT_EQ(now, 3u) << k;  // only to the new shard
    }
    const std::size_t after = remote::place(k, s2);  // index 0: a, 1: c
    const std::size_t named = after == 0 ? 0 : 2;
    if (at == 1) {
      ++moved_by_removing;
    } else {
      EXPECT_EQ(named, at) << k;  // keys of the remaining shards stay
    }
  }
  EXPECT_GT(moved_by_adding, kKeys * 20 / 100);  // about a quarter
  EXPECT_LT(moved_by_adding, kKeys * 30 / 100);
  EXPECT_EQ(moved_by_removing, share[1]);  // exactly the removed shard's keys
  for (int n : share) {
    EXPECT_GT(n, kKeys * 29 / 100);  // about a third each
    EXPECT_LT(n, kKeys * 38 / 100);
  }
  // A known placement: a change of the hash or the identity moves every
  // fleet's keys, and must be a format change.
  EXPECT_EQ(remote::shard_identity(remote::parse_url("redis://a:6379")), "redis://a:6379/0");
  EXPECT_EQ(remote::placed_key("npucache:7.0.0:obj:k#sig"), "npucache:7.0.0:obj:k");
}

namespace {

// An in-memory shard that is up, or down (every call fails) or full.
class MemoryShard final : public remote::Backend {
 public:
  explicit MemoryShard(const remote::Config& c) : Backend(c) {}
  remote::Answer<std::string> get(const std::string& k) override {
    std::lock_guard lock(mu);
    ++gets;
    if (down) return remote::Answer<std::string>::failed({remote::Failure::refused, "down"});
    auto it = values.find(k);
    return it == values.end() ? remote::Answer<std::string>::miss() : remote::Answer<std::string>::hit(it->second);
  }
  std::vector<remote::Answer<std::string>> get_many(const std::vector<std::string>& keys) override {
    std::vector<remote::Answer<std::string>> out;
    {
      std::lock_guard lock(mu);
      ++batches;
    }
    for (const auto& k : keys) out.push_back(get(k));
    return out;
  }
  remote::Answer<bool> put(const std::string& k, std::string_view v, remote::Overwrite) override {
    std::lock_guard lock(mu);
    if (down) return remote::Answer<bool>::failed({remote::Failure::refused, "down"});
    if (full) return remote::Answer<bool>::failed({remote::Failure::full, "OOM"});
    values[k] = std::string(v);
    return remote::Answer<bool>::hit(true);
  }
  remote::Answer<std::size_t> remove(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const auto& k : keys) n += values.erase(k);
    return remote::Answer<std::size_t>::hit(n);
  }
  remote::Answer<std::vector<std::string>> list(const std::string& prefix) override {
    std::lock_guard lock(mu);
    if (down) return remote::Answer<std::vector<std::string>>::failed({remote::Failure::refused, "down"});
    std::vector<std::string> out;
    for (const auto& [k, v] : values)
      if (k.rfind(prefix, 0) == 0) out.push_back(k);
    return remote::Answer<std::vector<std::string>>::hit(out);
  }
  std::mutex mu;
  std::map<std::string, std::string> values;
  bool down = false, full = false;
  int gets = 0, batches = 0;
};

}  // namespace

TEST(ShardedBackend, OneFailedShardFailsOnlyItsKeys) {
  const remote::Config c = remote::parse_remote("redis://a:1,redis://b:1,redis://c:1");
  std::vector<std::unique_ptr<remote::Backend>> shards;
  std::vector<MemoryShard*> mem;
  for (const auto& s : c.shards) {
    auto m = std::make_unique<MemoryShard>(s);
    mem.push_back(m.get());
    shards.push_back(std::move(m));
  }
  remote::ShardedBackend b(c, std::move(shards));
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) {
    keys.push_back(key(i));
    ASSERT_TRUE(b.put(keys.back(), "v" + std::to_string(i), remote::Overwrite::yes).is_hit());
  }
  for (int s = 0; s < 3; ++s) EXPECT_GT(mem[s]->values.size(), 5u);  // every shard holds some
  for (const auto& k : keys) EXPECT_EQ(mem[b.shard_of(k)]->values.count(k), 1u);
  // A get is one call to one shard.
  const int before = mem[0]->gets + mem[1]->gets + mem[2]->gets;
  EXPECT_EQ(b.get(keys[3]).value(), "v3");
  EXPECT_EQ(mem[0]->gets + mem[1]->gets + mem[2]->gets, before + 1);
  // get_many: one batch per shard, the answers in the keys' order.
  std::vector<std::string> asked = keys;
  std::reverse(asked.begin(), asked.end());
  asked.push_back(key(999));  // absent
  auto got = b.get_many(asked);
  ASSERT_EQ(got.size(), asked.size());
  for (std::size_t i = 0; i + 1 < asked.size(); ++i)
    EXPECT_EQ(got[i].value(), mem[b.shard_of(asked[i])]->values[asked[i]]);
  EXPECT_TRUE(got.back().is_miss());
  for (auto* m : mem) EXPECT_EQ(m->batches, 1);
  // Shard b down: its keys fail naming it, the others' are served.
  mem[1]->down = true;
  got = b.get_many(keys);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (b.shard_of(keys[i]) == 1) {
      ASSERT_TRUE(got[i].is_failure());
      EXPECT_EQ(got[i].fault().shard, "redis://b:1");
    } else {
      EXPECT_TRUE(got[i].is_hit());
    }
  }
  auto listed = b.list(format::remote_key::prefix());
  ASSERT_TRUE(listed.is_hit());
  EXPECT_EQ(listed.value().size(), mem[0]->values.size() + mem[2]->values.size());
  auto partial = b.take_partial_faults();
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_EQ(partial[0].shard, "redis://b:1");
  EXPECT_TRUE(b.take_partial_faults().empty());  // taken
  // Every shard down: the listing fails.
  mem[0]->down = mem[2]->down = true;
  EXPECT_TRUE(b.list(format::remote_key::prefix()).is_failure());
  mem[0]->down = mem[1]->down = mem[2]->down = false;
  // A full shard stops its writes only.
  mem[2]->full = true;
  int refused = 0, written = 0;
  for (int i = 100; i < 160; ++i) {
    auto p = b.put(key(i), "x", remote::Overwrite::yes);
    if (p.is_failure()) {
      EXPECT_EQ(b.shard_of(key(i)), 2u);
      EXPECT_EQ(p.fault().kind, remote::Failure::full);
      EXPECT_EQ(p.fault().repeated, refused > 0);  // the first is said, the rest skipped
      ++refused;
    } else {
      ++written;
    }
  }
  EXPECT_GT(refused, 5);
  EXPECT_GT(written, 20);
}

// ---- three real redis-server processes ---------------------------------------

namespace {

class ShardsOnRedis : public testing_support::TempDirTest {
 protected:
  ShardsOnRedis() : TempDirTest("shards") {}
  std::string dir(const std::string& name) const { return (base / name).string(); }
  std::string setting() const {
    std::string s;
    for (const auto& r : servers) s += (s.empty() ? "" : ",") + r->url("timeout=2");
    return s;
  }
  // A job of one method at batch `n` as rank n-1 of 8 (--static: an object
  // and an entry per batch).
  Out job(const std::string& d, int n) const {
    return sh("NPUCACHE_REMOTE='" + setting() + "' " + CACHE_WORKER + " run " + d + " seed prompt --static --batch " +
              std::to_string(n) + " --world 8 --rank " + std::to_string(n - 1));
  }
  nlohmann::json stats(const std::string& d) const {
    Out o = sh(std::string(NPUCACHE_CLI) + " stats " + d + " --json");
    EXPECT_EQ(o.status, 0) << o.text;
    return nlohmann::json::parse(o.text.substr(o.text.find('{')));
  }
  static long gets(const RedisServer& r) {
    const std::string info = r.command({"INFO", "commandstats"});
    const auto at = info.find("cmdstat_get:calls=");
    return at == std::string::npos ? 0 : std::stol(info.substr(at + 18));
  }
  // The object keys each server holds.
  std::vector<std::set<std::string>> objects() const {
    std::vector<std::set<std::string>> out;
    for (const auto& r : servers) {
      out.emplace_back();
      for (const auto& k : r->keys())
        if (k.rfind(format::remote_key::object(""), 0) == 0) out.back().insert(k);
    }
    return out;
  }
  std::vector<std::unique_ptr<RedisServer>> servers;
};

std::string compiled(const Out& o) {
  const auto at = o.text.find("compiled ");
  return at == std::string::npos ? "?" : o.text.substr(at + 9, o.text.find('\n', at) - at - 9);
}

}  // namespace

TEST_F(ShardsOnRedis, WarmHostReadsOncePerObjectAndAKilledShardOnlyMissesItsKeys) {
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<RedisServer>());
  constexpr int kJobs = 6;
  // Host A compiles and writes through the tier: each object on the shard
  // placement names, and nowhere else.
  for (int n = 1; n <= kJobs; ++n) {
    Out o = job(dir("a"), n);
    ASSERT_EQ(o.status, 0) << o.text;
    EXPECT_EQ(compiled(o), "1") << o.text;
  }
  const auto placed = remote::parse_remote(setting());
  std::vector<uint64_t> seeds;
  for (const auto& s : placed.shards) seeds.push_back(remote::shard_seed(remote::shard_identity(s)));
  const auto held = objects();
  std::size_t total = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    total += held[s].size();
    for (const auto& k : held[s]) EXPECT_EQ(remote::place(k, seeds), s) << k;
  }
  ASSERT_EQ(total, static_cast<std::size_t>(kJobs));
  // Host B, empty: every job served by the tier, one GET per object on the
  // shard holding it.
  for (const auto& r : servers) r->command({"CONFIG", "RESETSTAT"});
  for (int n = 1; n <= kJobs; ++n) {
    Out o = job(dir("b"), n);
    ASSERT_EQ(o.status, 0) << o.text;
    EXPECT_EQ(compiled(o), "0") << o.text;
  }
  for (std::size_t s = 0; s < 3; ++s) EXPECT_EQ(gets(*servers[s]), static_cast<long>(held[s].size())) << "shard " << s;
  // The shard holding the most objects dies; host C, empty, runs the jobs.
  std::size_t dead = 0;
  for (std::size_t s = 1; s < 3; ++s)
    if (held[s].size() > held[dead].size()) dead = s;
  ASSERT_GT(held[dead].size(), 0u);
  const std::string dead_url = servers[dead]->url("timeout=2");
  servers[dead]->kill();
  int hits = 0, compiles = 0;
  for (int n = 1; n <= kJobs; ++n) {
    Out o = job(dir("c"), n);
    ASSERT_EQ(o.status, 0) << o.text;  // the job never fails
    (compiled(o) == "0" ? hits : compiles) += 1;
  }
  EXPECT_EQ(compiles, static_cast<int>(held[dead].size()));      // the dead shard's keys: misses that compile
  EXPECT_EQ(hits, kJobs - static_cast<int>(held[dead].size()));  // the live shards' keys: hits
  const auto s = stats(dir("c"));
  ASSERT_TRUE(s["remote"].contains("shards")) << s.dump();
  const auto& per_shard = s["remote"]["shards"];
  EXPECT_EQ(per_shard.size(), 1u) << per_shard.dump();  // only the dead shard failed
  ASSERT_TRUE(per_shard.contains(dead_url)) << per_shard.dump();
  EXPECT_GE(per_shard[dead_url].value("refused", 0), 1) << per_shard.dump();
  Out text = sh(std::string(NPUCACHE_CLI) + " stats " + dir("c"));
  EXPECT_TRUE(has(text.text, "remote shard     " + dead_url + ": ")) << text.text;
  // remote ls: the live shards' entries, each shard reachable or not.
  Out ls = sh(std::string(NPUCACHE_CLI) + " remote ls --json --remote '" + setting() + "'");
  ASSERT_EQ(ls.status, 0) << ls.text;
  const auto j = nlohmann::json::parse(ls.text.substr(ls.text.find('{')));
  ASSERT_EQ(j["shards"].size(), 3u) << j.dump();
  std::size_t listed_objects = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& sh_i = j["shards"][i];
    EXPECT_EQ(sh_i["url"], servers[i]->url("timeout=2"));
    EXPECT_EQ(sh_i["reachable"].get<bool>(), i != dead) << sh_i.dump();
    if (i == dead) {
      EXPECT_TRUE(has(sh_i["failure"].get<std::string>(), "refused")) << sh_i.dump();
    } else {
      // Listed: the objects of the entries on live shards (an entry and its
      // object are placed each by its own key).
      EXPECT_LE(sh_i["objects"].get<std::size_t>(), held[i].size()) << sh_i.dump();
      EXPECT_EQ(sh_i["keys"].get<std::size_t>(), servers[i]->keys().size()) << sh_i.dump();
      listed_objects += sh_i["objects"].get<std::size_t>();
    }
  }
  EXPECT_EQ(j["objects"].get<std::size_t>(), listed_objects);
  Out ls_text = sh(std::string(NPUCACHE_CLI) + " remote ls --remote '" + setting() + "'");
  ASSERT_EQ(ls_text.status, 0) << ls_text.text;
  EXPECT_TRUE(has(ls_text.text, "shard " + dead_url + ": failed, refused")) << ls_text.text;
}

// A job's process keeps its connections: a shard killed while the job runs
// fails only the calls for its keys; the tier serves the others' and counts
// the dead shard's failure and the calls it skipped under its name. A
// stopped (slow) shard costs one timeout, then fails only its keys too.
TEST_F(ShardsOnRedis, ShardKilledMidJobOrSlowFailsOnlyItsKeys) {
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<RedisServer>());
  (void)storage::Store::open(dir("cache"), storage::Create::yes);
  const auto config = remote::parse_remote(setting());
  storage::RemoteTier tier(remote::make_backend(config));
  // The servers below the signing layer, which is always on.
  auto& sharded = dynamic_cast<remote::ShardedBackend&>(*tier.backend().wrapped());
  std::vector<storage::ObjectRecord> objects;
  for (int i = 0; i < 30; ++i) {
    storage::ObjectRecord o;
    char gk[33];
    std::snprintf(gk, sizeof gk, "%032x", i * 2654435761u);
    o.graph_key = gk;
    o.raw = "object " + std::to_string(i) + std::string(100, 'x');
    o.meta.raw_size = o.raw.size();
    o.meta.checksum = storage::checksum(o.raw);
    objects.push_back(o);
  }
  ASSERT_EQ(tier.push(objects, {}, dir("cache")).objects, objects.size());
  for (const auto& o : objects) ASSERT_TRUE(tier.object(o.graph_key, dir("cache")));  // every shard connected
  const std::size_t dead = sharded.shard_of(format::remote_key::object(objects[0].graph_key));
  servers[dead]->kill();
  std::size_t on_dead = 0;
  for (const auto& o : objects) {
    const bool dead_key = sharded.shard_of(format::remote_key::object(o.graph_key)) == dead;
    on_dead += dead_key;
    EXPECT_EQ(tier.object(o.graph_key, dir("cache")).has_value(), !dead_key) << o.graph_key;
  }
  EXPECT_TRUE(tier.can_write());  // a dead shard does not stop the others' writes
  storage::flush_stats();
  const auto s = storage::read_stats(dir("cache"));
  ASSERT_EQ(s.remote.shards.size(), 1u);
  const auto& counts = s.remote.shards.begin()->second;
  EXPECT_EQ(s.remote.shards.begin()->first, servers[dead]->url("timeout=2"));
  uint64_t failures = 0;
  for (const auto& [kind, n] : counts) failures += n;
  EXPECT_EQ(failures, on_dead);  // the first failure and every skipped call
  EXPECT_EQ(counts.count("skipped") ? counts.at("skipped") : 0, on_dead - 1);
  EXPECT_EQ(s.remote.hits, 2 * objects.size() - on_dead);
  // A slow shard (stopped: connections accepted, nothing answers) costs one
  // timeout, then only its keys (and the dead one's) are misses.
  const std::size_t slow = (dead + 1) % 3;
  std::string setting_fast;
  for (const auto& r : servers) setting_fast += (setting_fast.empty() ? "" : ",") + r->url("timeout=300ms");
  storage::RemoteTier fast(remote::make_backend(remote::parse_remote(setting_fast)));
  servers[slow]->stop();
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t served = 0, on_slow = 0;
  for (const auto& o : objects) {
    const std::size_t at = sharded.shard_of(format::remote_key::object(o.graph_key));  // the same placement
    on_slow += at == slow;
    const bool got = fast.object(o.graph_key, "").has_value();
    EXPECT_EQ(got, at != slow && at != dead) << o.graph_key;
    served += got;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  servers[slow]->resume();
  EXPECT_GT(on_slow, 0u);
  EXPECT_EQ(served, objects.size() - on_slow - on_dead);
  EXPECT_LT(took, 1.5);  // one 300 ms timeout, then the shard is skipped
}
