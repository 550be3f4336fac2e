// Signed publishing (remote/signing.h, remote/signed_backend.h) against a
// real redis-server: key files and their errors; a signed writer and a
// trusting reader; every attack refused as untrusted with its reason (a
// planted unsigned value, a value signed by a key not trusted, a value
// changed after signing, a signature copied from another key, a malformed
// record); rotation and revocation; racing signing writers end with
// consistent pairs; without trusted keys values read as before. Then whole
// jobs (cache_worker, as users run them): a new host trusting the CI
// writer's key starts warm, each attack makes it compile (counted
// `untrusted`, same outputs), and the commands keygen, push --signing-key
// and pull --trusted-keys.
#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/remote_options.h"
#include "remote/backend.h"
#include "remote/config.h"
#include "remote/signed_backend.h"
#include "remote/signing.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace npucache;
namespace fs = std::filesystem;
namespace signing = remote::signing;
using testing_support::has;
using testing_support::Out;
using testing_support::RedisServer;
using testing_support::sh;

namespace {

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string read(const fs::path& p) { return testing_support::slurp(p); }

// A backend around another that counts the calls (round trips).
class Counting final : public remote::Backend {
 public:
  explicit Counting(std::unique_ptr<remote::Backend> inner) : Backend(inner->config()), inner_(std::move(inner)) {}
  remote::Answer<std::string> get(const std::string& key) override {
    ++*calls;
    return inner_->get(key);
  }
  std::vector<remote::Answer<std::string>> get_many(const std::vector<std::string>& keys) override {
    ++*calls;
    return inner_->get_many(keys);
  }
  remote::Answer<bool> put(const std::string& key, std::string_view value, remote::Overwrite o) override {
    ++*calls;
    return inner_->put(key, value, o);
  }
  remote::Answer<std::size_t> remove(const std::vector<std::string>& keys) override {
    ++*calls;
    return inner_->remove(keys);
  }
  remote::Answer<std::vector<std::string>> list(const std::string& prefix) override {
    ++*calls;
    return inner_->list(prefix);
  }
  std::shared_ptr<int> calls = std::make_shared<int>(0);

 private:
  std::unique_ptr<remote::Backend> inner_;
};

class Signing : public testing_support::TempDirTest {
 protected:
  Signing() : TempDirTest("signing") {}
  // A key pair in base/<name>: its signing.key path and public key.
  std::pair<std::string, signing::PublicKey> key(const std::string& name) {
    const signing::PublicKey k = signing::write_key_files((base / name).string());
    return {(base / name / "signing.key").string(), k};
  }
  // A trusted keys file of `keys`.
  std::string trust(const std::string& name, const std::vector<signing::PublicKey>& keys) {
    std::string text = "# the fleet's writers\n";
    for (const auto& k : keys) text += k.text() + "  ci-writer\n";
    write(base / name, text);
    return (base / name).string();
  }
  std::unique_ptr<remote::Backend> backend(const std::string& url, const std::string& signing_key,
                                           const std::string& trusted) {
    remote::Config c = remote::parse_url(url);
    c.signing_key_file = signing_key;
    c.trusted_keys_file = trusted;
    return remote::make_backend(c);
  }
};

void expect_untrusted(const remote::Answer<std::string>& a, const std::string& why, const std::string& what) {
  ASSERT_TRUE(a.is_failure()) << what << " was served";
  EXPECT_EQ(a.fault().kind, remote::Failure::untrusted) << what << ": " << a.fault().detail;
  EXPECT_TRUE(has(a.fault().detail, why)) << what << ": " << a.fault().detail;
}

}  // namespace

TEST_F(Signing, KeygenWritesPrivateKeyFilesAndNeverReplacesOne) {
  const auto [secret, pub] = key("ci");
  struct stat st {};
  ASSERT_EQ(::stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(has(read(secret), "ed25519-secret:"));
  EXPECT_TRUE(has(read(base / "ci" / "signing.pub"), pub.text()));
  EXPECT_EQ(signing::SigningKey::load(secret)->public_key(), pub);
  EXPECT_EQ(signing::load_trusted((base / "ci" / "signing.pub").string()), std::vector<signing::PublicKey>{pub});
  EXPECT_EQ(pub.id(), pub.text().substr(8, 16));
  // A second keygen into the same directory keeps the first key.
  const std::string before = read(secret);
  try {
    (void)signing::write_key_files((base / "ci").string());
    ADD_FAILURE() << "an existing signing.key was replaced";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "exists")) << e.what();
  }
  EXPECT_EQ(read(secret), before);
  // Bad files: each error names the file and what is wrong.
  write(base / "bad.key", "ed25519-secret:abcd\n");
  write(base / "bad.pub", "# comment\n\ned25519:" + std::string(64, 'z') + "\n");
  write(base / "empty.pub", "# nobody\n");
  const std::pair<std::function<void()>, std::string> bad[] = {
      {[&] { (void)signing::SigningKey::load((base / "bad.key").string()); }, "holds no signing key"},
      {[&] { (void)signing::SigningKey::load((base / "missing.key").string()); }, "cannot be read"},
      {[&] { (void)signing::load_trusted((base / "bad.pub").string()); }, "line 3 is not a public key"},
      {[&] { (void)signing::load_trusted((base / "empty.pub").string()); }, "holds no key"},
      {[&] { (void)signing::load_trusted((base / "missing.pub").string()); }, "cannot be read"},
  };
  for (const auto& [load, why] : bad) {
    try {
      load();
      ADD_FAILURE() << "accepted: " << why;
    } catch (const ConfigError& e) {
      EXPECT_TRUE(has(e.what(), why)) << e.what();
      EXPECT_TRUE(has(e.what(), base.string())) << e.what();
    }
  }
  // A signing.key given as the trusted keys: refused without its secret.
  const std::string text = read(secret);
  const std::string seed = text.substr(text.find("ed25519-secret:") + 15, 64);
  try {
    (void)signing::load_trusted(secret);
    ADD_FAILURE() << "a signing.key was taken as trusted keys";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "is a secret signing key")) << e.what();
    EXPECT_FALSE(has(e.what(), seed.substr(0, 16))) << "the secret is in the message: " << e.what();
  }
}

TEST_F(Signing, SettingsFailClosed) {
  const auto [secret, pub] = key("a");
  const std::string trusted = trust("trusted", {pub});
  const std::string missing = (base / "missing").string();
  RemoteOptions o;
  o.url = "redis://127.0.0.1:1";
  o.signing_key_file = secret;
  o.trusted_keys_file = trusted;
  const remote::Config c = cache::resolve_remote(o);
  EXPECT_EQ(c.signing_key_file, secret);
  EXPECT_EQ(c.trusted_keys_file, trusted);
  // Set in code: a file that cannot be used is a ConfigError naming it.
  for (auto bad : {&RemoteOptions::signing_key_file, &RemoteOptions::trusted_keys_file}) {
    RemoteOptions b = o;
    b.*bad = missing;
    try {
      (void)cache::resolve_remote(b);
      ADD_FAILURE() << "a missing key file was accepted";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(has(e.what(), missing)) << e.what();
    }
  }
  // From the environment: unusable trusted keys mean no remote at all, an
  // unusable signing key a read-only one.
  RemoteOptions env;
  env.url = o.url;
  ::setenv("NPUCACHE_REMOTE_TRUSTED_KEYS", missing.c_str(), 1);
  EXPECT_FALSE(cache::resolve_remote(env).enabled());
  ::setenv("NPUCACHE_REMOTE_TRUSTED_KEYS", trusted.c_str(), 1);
  ::setenv("NPUCACHE_REMOTE_SIGNING_KEY", missing.c_str(), 1);
  const remote::Config e = cache::resolve_remote(env);
  ::unsetenv("NPUCACHE_REMOTE_TRUSTED_KEYS");
  ::unsetenv("NPUCACHE_REMOTE_SIGNING_KEY");
  EXPECT_TRUE(e.enabled());
  EXPECT_EQ(e.trusted_keys_file, trusted);
  EXPECT_TRUE(e.signing_key_file.empty());
  EXPECT_TRUE(e.read_only);
}

TEST_F(Signing, RecordBindsTheKeyAndTheValue) {
  const auto [secret, pub] = key("a");
  const auto k = signing::SigningKey::load(secret);
  const std::string rec = k->sign("npucache:7.0.0:obj:k1", "value");
  ASSERT_EQ(rec.size(), signing::kRecordBytes);
  std::string why;
  const auto r = signing::decode(rec, &why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->signer, pub);
  EXPECT_EQ(r->value_hash, signing::hash("value"));
  EXPECT_TRUE(signing::verify(*r, "npucache:7.0.0:obj:k1"));
  EXPECT_FALSE(signing::verify(*r, "npucache:7.0.0:obj:k2"));
  auto flipped = *r;
  flipped.value_hash[0] ^= 1;
  EXPECT_FALSE(signing::verify(flipped, "npucache:7.0.0:obj:k1"));
  EXPECT_FALSE(signing::decode(rec.substr(0, 100), &why));
  EXPECT_TRUE(has(why, "bytes")) << why;
  std::string v2 = rec;
  v2[4] = 2;
  EXPECT_FALSE(signing::decode(v2, &why));
  EXPECT_TRUE(has(why, "version 2")) << why;
  EXPECT_FALSE(signing::decode("", &why));
}

TEST_F(Signing, TrustingReaderRefusesEveryAttack) {
  RedisServer server;
  const auto [a_key, a] = key("a");
  const auto [c_key, c] = key("c");  // another fleet's, not trusted
  const std::string trusted = trust("trusted", {a});
  auto writer = backend(server.url(), a_key, "");
  auto other = backend(server.url(), c_key, "");
  auto plain = backend(server.url(), "", "");
  EXPECT_TRUE(writer->authenticated()) << "a signer reads only what it trusts (its own key)";
  EXPECT_FALSE(plain->authenticated());
  for (const char* k : {"k:signed", "k:changed", "k:source"})
    ASSERT_TRUE(writer->put(k, "v-" + std::string(k), remote::Overwrite::no).is_hit());
  ASSERT_TRUE(plain->put("k:unsigned", "planted", remote::Overwrite::no).is_hit());
  ASSERT_TRUE(other->put("k:other", "theirs", remote::Overwrite::no).is_hit());
  ASSERT_EQ(server.command({"SET", "k:changed", "v-changed, then changed"}), "OK");
  ASSERT_EQ(server.command({"SET", "k:copied", "v-k:source"}), "OK");
  ASSERT_EQ(server.command({"SET", "k:copied#sig", server.command({"GET", "k:source#sig"})}), "OK");
  ASSERT_EQ(server.command({"SET", "k:malformed", "x"}), "OK");
  ASSERT_EQ(server.command({"SET", "k:malformed#sig", std::string("NPSG\x01\x01short", 11)}), "OK");

  auto counted = std::make_unique<Counting>(remote::make_backend(remote::parse_url(server.url())));
  const auto calls = counted->calls;
  remote::Config rc = remote::parse_url(server.url());
  rc.trusted_keys_file = trusted;
  auto reader = remote::make_signed_backend(std::move(counted), rc);
  EXPECT_TRUE(reader->authenticated());
  auto got = reader->get("k:signed");
  ASSERT_TRUE(got.is_hit());
  EXPECT_EQ(got.value(), "v-k:signed");
  EXPECT_EQ(*calls, 1);  // the value and its signature in one round trip
  EXPECT_TRUE(reader->get("k:absent").is_miss());
  expect_untrusted(reader->get("k:unsigned"), "unsigned", "a planted unsigned value");
  expect_untrusted(reader->get("k:other"), "signed by key " + c.id() + " which is not trusted",
                   "a value signed by another key");
  expect_untrusted(reader->get("k:changed"), "signature does not match the value (the value was changed",
                   "a value changed after signing");
  expect_untrusted(reader->get("k:copied"), "signature does not match the value (it was made for another key",
                   "a signature copied from another key");
  expect_untrusted(reader->get("k:malformed"), "not 134", "a malformed signature record");
  // get_many: the same answers, in one round trip for every key.
  *calls = 0;
  const std::vector<std::string> keys{"k:signed", "k:unsigned", "k:other", "k:changed", "k:copied", "k:absent"};
  auto many = reader->get_many(keys);
  EXPECT_EQ(*calls, 1);
  ASSERT_EQ(many.size(), keys.size());
  EXPECT_TRUE(many[0].is_hit());
  for (std::size_t i = 1; i < 5; ++i) {
    ASSERT_TRUE(many[i].is_failure()) << keys[i];
    EXPECT_EQ(many[i].fault().kind, remote::Failure::untrusted) << keys[i];
  }
  EXPECT_TRUE(many[5].is_miss());
  // Untrusted values are not removed by a reader: they may be another fleet's.
  EXPECT_EQ(server.command({"EXISTS", "k:other", "k:unsigned"}), "2");
  // Without trusted keys, signed and unsigned values are read as they are.
  for (const auto& k : {"k:signed", "k:unsigned", "k:other", "k:changed"}) EXPECT_TRUE(plain->get(k).is_hit()) << k;
  // A signer trusts its own key alone: what it would sign on its next
  // write of the key is never a value it did not verify.
  EXPECT_TRUE(writer->get("k:signed").is_hit());
  expect_untrusted(writer->get("k:unsigned"), "unsigned", "an unsigned value read by a signer");
  expect_untrusted(writer->get("k:other"), "signed by key " + c.id() + " which is not trusted",
                   "another fleet's value read by a signer");
  // Listing never shows a signature record; removal takes it along.
  auto listed = reader->list("k:");
  ASSERT_TRUE(listed.is_hit());
  for (const auto& k : listed.value()) EXPECT_FALSE(has(k, "#sig")) << k;
  EXPECT_EQ(listed.value().size(), 7u);
  // A host with no keys lists the values alone too: a signature record read
  // as a table's record would be a damaged value on every start.
  auto plain_listed = plain->list("k:");
  ASSERT_TRUE(plain_listed.is_hit());
  for (const auto& k : plain_listed.value()) EXPECT_FALSE(has(k, "#sig")) << k;
  EXPECT_EQ(plain_listed.value().size(), 7u);
  ASSERT_TRUE(writer->remove({"k:signed"}).is_hit());
  EXPECT_EQ(server.command({"EXISTS", "k:signed", "k:signed#sig"}), "0");
  // A trusted keys file that cannot be read trusts nothing (fail closed).
  remote::Config gone = remote::parse_url(server.url());
  gone.trusted_keys_file = (base / "no-such-file").string();
  auto closed = remote::make_backend(gone);
  EXPECT_TRUE(closed->authenticated());
  expect_untrusted(closed->get("k:source"), "cannot be read", "a value read with an unreadable trusted keys file");
}

TEST_F(Signing, WriterKeepsTrustedValuesAndReplacesTheOthers) {
  RedisServer server;
  const auto [a_key, a] = key("a");
  const auto [c_key, c] = key("c");
  auto writer = backend(server.url(), a_key, "");
  auto plain = backend(server.url(), "", "");
  auto other = backend(server.url(), c_key, "");
  ASSERT_TRUE(writer->put("kept", "first", remote::Overwrite::no).value());
  auto again = writer->put("kept", "second", remote::Overwrite::no);
  ASSERT_TRUE(again.is_hit());
  EXPECT_FALSE(again.value());  // validly signed by this writer: written once
  EXPECT_EQ(server.command({"GET", "kept"}), "first");
  // Present but unsigned, or signed by a key this writer does not trust:
  // replaced by its own value and signature, never signed as it is.
  ASSERT_TRUE(plain->put("planted", "evil", remote::Overwrite::no).value());
  ASSERT_TRUE(other->put("foreign", "theirs", remote::Overwrite::no).value());
  for (const char* k : {"planted", "foreign"}) {
    auto put = writer->put(k, "good", remote::Overwrite::no);
    ASSERT_TRUE(put.is_hit()) << k;
    EXPECT_TRUE(put.value()) << k;
    EXPECT_EQ(server.command({"GET", k}), "good");
  }
  const std::string trusted = trust("trusted", {a});
  auto reader = backend(server.url(), "", trusted);
  for (const char* k : {"kept", "planted", "foreign"}) EXPECT_TRUE(reader->get(k).is_hit()) << k;
  // Overwrite::yes (entries) re-signs the new value.
  ASSERT_TRUE(writer->put("kept", "replaced", remote::Overwrite::yes).value());
  auto r = reader->get("kept");
  ASSERT_TRUE(r.is_hit());
  EXPECT_EQ(r.value(), "replaced");
}

TEST_F(Signing, RotationAndRevocation) {
  RedisServer server;
  const auto [old_key, old_pub] = key("old");
  const auto [new_key, new_pub] = key("new");
  ASSERT_TRUE(backend(server.url(), old_key, "")->put("by-old", "1", remote::Overwrite::no).value());
  ASSERT_TRUE(backend(server.url(), new_key, "")->put("by-new", "2", remote::Overwrite::no).value());
  // Rotation: both keys trusted while writers move to the new one.
  auto both = backend(server.url(), "", trust("both", {old_pub, new_pub}));
  EXPECT_TRUE(both->get("by-old").is_hit());
  EXPECT_TRUE(both->get("by-new").is_hit());
  // Revocation: the old key removed from the file; its values are untrusted.
  auto revoked = backend(server.url(), "", trust("new-only", {new_pub}));
  expect_untrusted(revoked->get("by-old"), "signed by key " + old_pub.id() + " which is not trusted",
                   "a value of a revoked key");
  EXPECT_TRUE(revoked->get("by-new").is_hit());
}

TEST_F(Signing, RacingSigningWritersEndWithConsistentPairs) {
  RedisServer server;
  const auto [a_key, a] = key("a");
  const auto [b_key, b] = key("b");
  const std::string trusted = trust("trusted", {a, b});
  constexpr int kKeys = 60;
  auto plain = backend(server.url(), "", "");
  for (int i = 0; i < kKeys; i += 3)
    ASSERT_TRUE(plain->put("race:" + std::to_string(i), "planted", remote::Overwrite::no).is_hit());
  // Four writers, two keys, each its own values: objects (written once)
  // and entries (replaced), all four on the same key at the same moment.
  std::barrier start(4);
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      auto be = backend(server.url("timeout=10"), w % 2 ? a_key : b_key, "");
      for (int i = 0; i < kKeys; ++i) {
        const std::string v = "writer " + std::to_string(w) + " value " + std::to_string(i);
        start.arrive_and_wait();
        EXPECT_TRUE(
            be->put("race:" + std::to_string(i), v, w < 2 ? remote::Overwrite::no : remote::Overwrite::yes).is_hit());
      }
    });
  for (auto& t : writers) t.join();
  auto reader = backend(server.url(), "", trusted);
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back("race:" + std::to_string(i));
  auto got = reader->get_many(keys);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(got[i].is_hit()) << keys[i] << ": " << (got[i].is_failure() ? got[i].fault().detail : "a miss");
    EXPECT_TRUE(has(got[i].value(), "writer ")) << got[i].value();
  }
}

// A signed tier of three servers: the signing layer sits above the shards,
// so each value and its signature record live on one server (the value's),
// a trusting reader reads every key, and nothing is signed twice.
TEST_F(Signing, ASignedTierOfShardsKeepsEachSignatureWithItsValue) {
  RedisServer a, b, c;
  const auto [ci_key, ci] = key("ci");
  const std::string trusted = trust("trusted", {ci});
  const std::string urls = a.url() + "," + b.url() + "," + c.url();
  const auto tier = [&](const std::string& signing_key, const std::string& trusted_keys) {
    remote::Config cfg = remote::parse_remote(urls);
    cfg.signing_key_file = signing_key;
    cfg.trusted_keys_file = trusted_keys;
    return remote::make_backend(cfg);
  };
  auto writer = tier(ci_key, "");
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) {
    keys.push_back("npucache:test:obj:" + std::to_string(i));
    ASSERT_TRUE(writer->put(keys.back(), "value " + std::to_string(i), remote::Overwrite::no).is_hit());
  }
  std::size_t values = 0;
  for (RedisServer* s : {&a, &b, &c}) {
    const std::vector<std::string> held = s->keys();
    const std::set<std::string> set(held.begin(), held.end());
    for (const auto& k : keys) {
      if (!set.count(k)) continue;
      ++values;
      EXPECT_TRUE(set.count(k + "#sig")) << k << "'s signature is on another server";
    }
    for (const auto& k : held) {
      if (has(k, "#sig")) {
        EXPECT_TRUE(set.count(k.substr(0, k.size() - 4))) << k << " without its value";
      }
    }
  }
  EXPECT_EQ(values, keys.size());  // each value on one server
  auto reader = tier("", trusted);
  const auto got = reader->get_many(keys);
  for (std::size_t i = 0; i < keys.size(); ++i)
    ASSERT_TRUE(got[i].is_hit()) << keys[i] << ": " << (got[i].is_failure() ? got[i].fault().detail : "a miss");
  const auto listed = reader->list("npucache:test:");
  ASSERT_TRUE(listed.is_hit());
  EXPECT_EQ(listed.value().size(), keys.size());  // no signature record listed
  // A value changed on its server is refused, the others still read.
  for (RedisServer* s : {&a, &b, &c}) {
    if (s->command({"EXISTS", keys[0]}) == "1") {
      ASSERT_EQ(s->command({"SET", keys[0], "planted"}), "OK");
    }
  }
  expect_untrusted(reader->get(keys[0]), "does not match the value", "a changed value on a shard");
  EXPECT_TRUE(reader->get(keys[1]).is_hit());
}

// ---- whole jobs -------------------------------------------------------------

namespace {

class SignedJobs : public Signing {
 protected:
  std::string dir(const std::string& name) const { return (base / name).string(); }
  Out worker(const std::string& d, const std::string& url, const std::string& env = "") const {
    return sh("unset NPUCACHE_REMOTE_SIGNING_KEY NPUCACHE_REMOTE_TRUSTED_KEYS; " + env + " NPUCACHE_REMOTE='" + url +
              "' " + CACHE_WORKER + " run " + d + " seed prompt");
  }
  nlohmann::json stats(const std::string& d) const {
    Out o = sh(std::string(NPUCACHE_CLI) + " stats " + d + " --json");
    EXPECT_EQ(o.status, 0) << o.text;
    return nlohmann::json::parse(o.text.substr(o.text.find('{')));
  }
  static std::string result(const std::string& t) { return t.substr(t.find("result")); }
  static std::string compiled(const Out& o) {
    const auto at = o.text.find("compiled ");
    return at == std::string::npos ? "?" : o.text.substr(at + 9, o.text.find('\n', at) - at - 9);
  }
  static uint64_t untrusted(const nlohmann::json& s) {
    const auto& e = s["remote"]["errors"];
    return e.contains("untrusted") ? e["untrusted"].get<uint64_t>() : 0;
  }
};

}  // namespace

TEST_F(SignedJobs, TrustingHostStartsWarmAndRefusesEveryAttack) {
  RedisServer server;
  const auto [ci_key, ci] = key("ci");
  const auto [c_key, c] = key("intruder");
  const std::string trusted = trust("trusted", {ci});
  const std::string writer_env = "NPUCACHE_REMOTE_SIGNING_KEY=" + ci_key;
  const std::string reader_env = "NPUCACHE_REMOTE_TRUSTED_KEYS=" + trusted;
  Out cold = worker(dir("ci"), server.url(), writer_env);
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_EQ(compiled(cold), "1") << cold.text;
  std::string obj, entry;
  for (const auto& k : server.keys()) {
    if (has(k, ":obj:") && !has(k, "#sig")) obj = k;
    if (has(k, ":entry:") && !has(k, "#sig")) entry = k;
  }
  ASSERT_FALSE(obj.empty());
  ASSERT_FALSE(entry.empty());
  EXPECT_EQ(server.command({"EXISTS", obj + "#sig", entry + "#sig"}), "2");
  // A serving host trusting the CI key: warm from the remote, committed locally.
  Out warm = worker(dir("serve"), server.url("read-only"), reader_env);
  ASSERT_EQ(warm.status, 0) << warm.text;
  EXPECT_EQ(compiled(warm), "0") << warm.text;
  EXPECT_TRUE(has(warm.text, "read from the remote cache")) << warm.text;
  EXPECT_EQ(result(warm.text), result(cold.text));
  EXPECT_EQ(untrusted(stats(dir("serve"))), 0u);
  Out local = worker(dir("serve"), "off");
  EXPECT_TRUE(has(local.text, "compiled 0\nstatus hit")) << local.text;
  // Without trusted keys the signed values are read as before.
  Out as_before = worker(dir("plain"), server.url("read-only"));
  EXPECT_EQ(compiled(as_before), "0") << as_before.text;

  // Each attack: the object's value or signature replaced; a trusting host
  // compiles (same outputs), warns and counts it untrusted.
  const std::string value = server.command({"GET", obj});
  const std::string sig = server.command({"GET", obj + "#sig"});
  const std::string entry_sig = server.command({"GET", entry + "#sig"});
  std::string changed = value;
  changed[changed.size() / 2] ^= 1;
  const std::string intruder_sig = signing::SigningKey::load(c_key)->sign(obj, value);
  const struct {
    std::string name, value, sig;
  } attacks[] = {
      {"unsigned", value, ""},
      {"intruder", value, intruder_sig},
      {"changed", changed, sig},
      {"copied", value, entry_sig},
  };
  for (const auto& at : attacks) {
    ASSERT_EQ(server.command({"SET", obj, at.value}), "OK");
    if (at.sig.empty())
      server.command({"DEL", obj + "#sig"});
    else
      ASSERT_EQ(server.command({"SET", obj + "#sig", at.sig}), "OK");
    const std::string d = dir("attack-" + at.name);
    Out o = worker(d, server.url("read-only"), reader_env);
    ASSERT_EQ(o.status, 0) << at.name << "\n" << o.text;
    EXPECT_EQ(compiled(o), "1") << at.name << "\n" << o.text;
    EXPECT_TRUE(has(o.text, "no trusted key signed")) << at.name << "\n" << o.text;
    EXPECT_EQ(result(o.text), result(cold.text)) << at.name;
    EXPECT_EQ(untrusted(stats(d)), 1u) << at.name << stats(d).dump();
  }
  // A trusted keys file of the environment that cannot be read: no remote
  // at all (never an unsigned value), warned.
  Out closed = worker(dir("closed"), server.url(), "NPUCACHE_REMOTE_TRUSTED_KEYS=" + dir("missing.pub"));
  ASSERT_EQ(closed.status, 0) << closed.text;
  EXPECT_EQ(compiled(closed), "1") << closed.text;
  EXPECT_TRUE(has(closed.text, "is not used")) << closed.text;
  // A CI writer that trusts its own key replaces what it does not trust
  // with a signed pair.
  Out rewrite = worker(dir("ci2"), server.url(), writer_env + " " + reader_env);
  EXPECT_EQ(compiled(rewrite), "1") << rewrite.text;
  Out healed = worker(dir("serve2"), server.url("read-only"), reader_env);
  EXPECT_EQ(compiled(healed), "0") << healed.text;
}

// A signing writer (no trusted keys file) takes no unsigned value: the
// program it took would be stored and then signed by its next write of the
// key (a push, another process's adopted object), and every host trusting
// the fleet's key would run whatever was planted.
TEST_F(SignedJobs, ASignerNeverTakesAnUnsignedValue) {
  RedisServer server;
  const auto [ci_key, ci] = key("ci");
  const std::string trusted = trust("trusted", {ci});
  Out planted = worker(dir("anyone"), server.url());  // unsigned values, as a planter's
  ASSERT_EQ(planted.status, 0) << planted.text;
  EXPECT_EQ(compiled(planted), "1") << planted.text;
  Out ci_run = worker(dir("ci"), server.url(), "NPUCACHE_REMOTE_SIGNING_KEY=" + ci_key);
  ASSERT_EQ(ci_run.status, 0) << ci_run.text;
  EXPECT_EQ(compiled(ci_run), "1") << "the signer took an unsigned value\n" << ci_run.text;
  EXPECT_GE(untrusted(stats(dir("ci"))), 1u) << stats(dir("ci")).dump();
  EXPECT_EQ(result(ci_run.text), result(planted.text));
  // What it wrote instead is signed: a trusting host starts warm from it.
  Out serve = worker(dir("serve"), server.url("read-only"), "NPUCACHE_REMOTE_TRUSTED_KEYS=" + trusted);
  ASSERT_EQ(serve.status, 0) << serve.text;
  EXPECT_EQ(compiled(serve), "0") << serve.text;
}

// The code_version fast path decides without a trace: on a remote whose
// values a trusted key signed it takes the remote's entry (no trace, no
// compile); the same remote read without trusted keys is a claim, so the
// host traces first (mix-ups).
TEST_F(SignedJobs, FastPathTakesSignedEntriesWithoutATrace) {
  RedisServer server;
  const auto [ci_key, ci] = key("ci");
  const std::string trusted = trust("trusted", {ci});
  const auto run = [&](const std::string& d, const std::string& url, const std::string& env) {
    return sh("unset NPUCACHE_REMOTE_SIGNING_KEY NPUCACHE_REMOTE_TRUSTED_KEYS; " + env + " NPUCACHE_REMOTE='" + url +
              "' " + CACHE_WORKER + " run " + d + " seed prompt --fast --code-version v1");
  };
  Out cold = run(dir("ci"), server.url(), "NPUCACHE_REMOTE_SIGNING_KEY=" + ci_key);
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_EQ(compiled(cold), "1") << cold.text;
  Out signed_fast = run(dir("serve"), server.url("read-only"), "NPUCACHE_REMOTE_TRUSTED_KEYS=" + trusted);
  ASSERT_EQ(signed_fast.status, 0) << signed_fast.text;
  EXPECT_TRUE(has(signed_fast.text, "traced 0\ncompiled 0\n")) << signed_fast.text;
  EXPECT_EQ(result(signed_fast.text), result(cold.text));
  Out unsigned_fast = run(dir("plain"), server.url("read-only"), "");
  ASSERT_EQ(unsigned_fast.status, 0) << unsigned_fast.text;
  EXPECT_TRUE(has(unsigned_fast.text, "traced 1\ncompiled 0\n")) << unsigned_fast.text;
  EXPECT_EQ(result(unsigned_fast.text), result(cold.text));
}

TEST_F(SignedJobs, CommandsKeygenSignedPushTrustedPull) {
  RedisServer server;
  const std::string cli = std::string(NPUCACHE_CLI);
  Out kg = sh(cli + " remote keygen " + dir("keys"));
  ASSERT_EQ(kg.status, 0) << kg.text;
  EXPECT_TRUE(has(kg.text, "signing.key")) << kg.text;
  struct stat st {};
  ASSERT_EQ(::stat((base / "keys" / "signing.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Out again = sh(cli + " remote keygen " + dir("keys"));
  EXPECT_NE(again.status, 0) << again.text;
  EXPECT_TRUE(has(again.text, "exists")) << again.text;
  const std::string key = dir("keys") + "/signing.key", pub = dir("keys") + "/signing.pub";
  ASSERT_EQ(worker(dir("a"), "off").status, 0);
  Out push = sh(cli + " remote push " + dir("a") + " --remote " + server.url() + " --signing-key " + key);
  ASSERT_EQ(push.status, 0) << push.text;
  EXPECT_TRUE(has(push.text, "pushed 1 entries, 1 objects")) << push.text;
  for (const auto& k : server.keys()) {
    if (has(k, "#sig")) continue;
    EXPECT_EQ(server.command({"EXISTS", k + "#sig"}), "1") << k << " is not signed";
  }
  Out pull = sh(cli + " remote pull Model " + dir("b") + " --remote " + server.url() + " --trusted-keys " + pub);
  ASSERT_EQ(pull.status, 0) << pull.text;
  EXPECT_TRUE(has(pull.text, "pulled 1 entries, 1 objects")) << pull.text;
  // Trusting another key: nothing usable is pulled, the entries are refused.
  Out other = sh(cli + " remote keygen " + dir("other"));
  ASSERT_EQ(other.status, 0) << other.text;
  Out refused = sh(cli + " remote pull Model " + dir("c") + " --remote " + server.url() + " --trusted-keys " +
                   dir("other") + "/signing.pub");
  EXPECT_TRUE(has(refused.text, "pulled 0 entries")) << refused.text;
  EXPECT_TRUE(has(refused.text, "no trusted key signed")) << refused.text;
  // A bad key file given on the command line is a usage error naming it.
  Out bad = sh(cli + " remote ls --remote " + server.url() + " --trusted-keys " + dir("nope.pub"));
  EXPECT_NE(bad.status, 0) << bad.text;
  EXPECT_TRUE(has(bad.text, "nope.pub")) << bad.text;
}
