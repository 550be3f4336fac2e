// Mix-ups against a real redis-server (tests/support/redis_server.h): one
// method's honest object offered as another's, the way anyone who can
// write an unsigned remote (or a local cache directory) would do it, with
// format's own encoders, so every checksum holds. Method A is the seed
// model's prompt; method B is its decode with a scale hyper-parameter (the
// same inputs and parameters, another graph, other results). A run that
// took B's program for A would print B's result. Jobs run as separate
// processes (cache_worker, the npucache command), as users run them.
#include <npucache/error.h>

#include "format/names.h"
#include "format/object_file.h"
#include "format/remote_value.h"
#include "storage/store.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <set>

using namespace npucache;
namespace fs = std::filesystem;
using testing_support::has;
using testing_support::Out;
using testing_support::RedisServer;
using testing_support::sh;

namespace {

constexpr std::size_t kMaxObject = 64u << 20;
const std::string kFastA = "prompt --fast --code-version v1";
const std::string kFastB = "decode --scale 3 --fast --code-version v1";

std::string compiled(const Out& o) {
  // The worker's line "compiled N" (a warning may say "compiled with").
  const std::string text = "\n" + o.text;
  const auto at = text.find("\ncompiled ");
  return at == std::string::npos ? "?" : text.substr(at + 10, text.find('\n', at + 1) - at - 10);
}
std::string result(const std::string& t) { return t.substr(t.find("result")); }

class MixupTest : public testing_support::TempDirTest {
 protected:
  MixupTest() : TempDirTest("mixups") {}
  std::string dir(const std::string& name) const { return (base / name).string(); }
  Out worker(const std::string& d, const std::string& url, const std::string& args) const {
    return sh("NPUCACHE_REMOTE='" + url + "' " + CACHE_WORKER + " run " + d + " seed " + args);
  }
  uint64_t corrupt(const std::string& d) const {
    Out o = sh(std::string(NPUCACHE_CLI) + " stats " + d + " --json");
    EXPECT_EQ(o.status, 0) << o.text;
    const auto s = nlohmann::json::parse(o.text.substr(o.text.find('{')));
    const auto& e = s["remote"]["errors"];
    return e.contains("corrupt") ? e["corrupt"].get<uint64_t>() : 0;
  }

  // Host "a" compiles A and B and writes both to the remote.
  void warm(const RedisServer& server) {
    Out a = worker(dir("a"), server.url(), kFastA), b = worker(dir("a"), server.url(), kFastB);
    ASSERT_EQ(a.status, 0) << a.text;
    ASSERT_EQ(b.status, 0) << b.text;
    result_a = result(a.text);
    result_b = result(b.text);
    ASSERT_NE(result_a, result_b) << "B must compute something else than A";
    for (const auto& k : server.keys()) {
      if (has(k, ":entry:") && k.size() > 7 && k.substr(k.size() - 7) == "/prompt") entry_a = k;
      if (has(k, ":entry:") && k.size() > 7 && k.substr(k.size() - 7) == "/decode") entry_b = k;
    }
    ASSERT_FALSE(entry_a.empty());
    ASSERT_FALSE(entry_b.empty());
    key_a = format::decode_remote_entry(server.command({"GET", entry_a}), "", "").entry.graph_key;
    key_b = format::decode_remote_entry(server.command({"GET", entry_b}), "", "").entry.graph_key;
    ASSERT_NE(key_a, key_b);
    honest_b =
        format::decode_remote_object(server.command({"GET", format::remote_key::object(key_b)}), "", key_b, kMaxObject);
  }
  // B's honest object with A's graph key, resealed as a remote value.
  std::string planted() const {
    format::ObjectRecord o = honest_b;
    o.graph_key = key_a;
    return format::encode_remote_object(o);
  }
  // What a cache directory holds under A's key (its artifact bytes), or "".
  std::string local_a(const std::string& d) const {
    const storage::Store s = storage::Store::open(d, storage::Create::no);
    return s.has_object(key_a) ? s.object(key_a, false).raw : "";
  }

  std::string result_a, result_b, entry_a, entry_b, key_a, key_b;
  format::ObjectRecord honest_b;
};

}  // namespace

// Verifying mode on a new host: B's object planted under A's key is not
// run; it is counted damaged and removed, nothing of it is committed, A is
// compiled (its result, not B's) and written back.
TEST_F(MixupTest, PlantedObjectIsNotServedInVerifyingMode) {
  RedisServer server;
  warm(server);
  const std::string value = planted();
  const std::string obj_a = format::remote_key::object(key_a);
  ASSERT_EQ(server.command({"SET", obj_a, value}), "OK");
  Out o = worker(dir("n"), server.url(), "prompt");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(compiled(o), "1") << o.text;
  EXPECT_EQ(result(o.text), result_a) << o.text;
  EXPECT_TRUE(has(o.text, "is another computation's")) << o.text;
  EXPECT_EQ(corrupt(dir("n")), 1u);
  EXPECT_TRUE(server.command({"GET", obj_a}) != value);  // removed, then A's own object written back
  const std::string mine = local_a(dir("n"));
  EXPECT_FALSE(mine.empty());
  EXPECT_TRUE(mine != honest_b.raw);
  // The next new host is served A's object.
  Out next = worker(dir("m"), server.url(), "prompt");
  EXPECT_EQ(compiled(next), "0") << next.text;
  EXPECT_EQ(result(next.text), result_a) << next.text;
}

// The code_version fast path: A's remote entry edited to name B's honest
// object is not taken from an unsigned remote; the call traces and is
// served A's own object.
TEST_F(MixupTest, FastPathDoesNotTakeUnsignedRemoteEntries) {
  RedisServer server;
  warm(server);
  format::RemoteEntry re = format::decode_remote_entry(server.command({"GET", entry_a}), "", "");
  re.entry.graph_key = key_b;
  re.entry.object_checksum = honest_b.meta.checksum;
  re.object_hash = format::content_hash(server.command({"GET", format::remote_key::object(key_b)}));
  ASSERT_EQ(server.command({"SET", entry_a, format::encode_remote_entry(re)}), "OK");
  Out o = worker(dir("n"), server.url(), kFastA);
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(result(o.text), result_a) << o.text;
  EXPECT_TRUE(has(o.text, "traced 1\ncompiled 0\n")) << o.text;
  EXPECT_TRUE(has(o.text, "is not signed")) << o.text;
}

// `remote pull` checks before it commits: B's object planted under A's key
// (A's entry naming the planted value's hash) is reported and not pulled;
// B's own entry and object are.
TEST_F(MixupTest, PullCommitsNoPlantedObject) {
  RedisServer server;
  warm(server);
  const std::string value = planted();
  ASSERT_EQ(server.command({"SET", format::remote_key::object(key_a), value}), "OK");
  format::RemoteEntry re = format::decode_remote_entry(server.command({"GET", entry_a}), "", "");
  re.object_hash = format::content_hash(value);
  ASSERT_EQ(server.command({"SET", entry_a, format::encode_remote_entry(re)}), "OK");
  Out pull = sh(std::string(NPUCACHE_CLI) + " remote pull Model " + dir("p") + " --remote " + server.url());
  EXPECT_EQ(pull.status, 1) << pull.text;
  EXPECT_TRUE(has(pull.text, "/prompt: its object " + key_a + " is refused")) << pull.text;
  EXPECT_TRUE(has(pull.text, "is another computation's")) << pull.text;
  EXPECT_TRUE(has(pull.text, "pulled 1 entries, 1 objects")) << pull.text;
  EXPECT_TRUE(local_a(dir("p")).empty());
  EXPECT_EQ(corrupt(dir("p")), 1u);
  Out o = worker(dir("p"), "off", "prompt");
  EXPECT_EQ(compiled(o), "1") << o.text;
  EXPECT_EQ(result(o.text), result_a) << o.text;
}

// A local object file whose artifact is another method's (resealed with
// format's encoder, so its checksums hold) is reported and rebuilt.
TEST_F(MixupTest, LocalObjectOfAnotherMethodIsRebuilt) {
  RedisServer server;
  warm(server);
  server.kill();
  const storage::Store s = storage::Store::open(dir("a"), storage::Create::no);
  format::ObjectRecord o = s.object(key_b, true);
  o.graph_key = key_a;
  const fs::path file = fs::path(dir("a")) / format::names::kObjectsDir / format::names::object_file(key_a);
  ASSERT_TRUE(fs::exists(file));
  const auto plant = [&] {
    const fs::path tmp = file.string() + ".planted";
    std::ofstream(tmp, std::ios::binary) << format::encode_object(o);
    ::chmod(tmp.c_str(), 0600);
    fs::rename(tmp, file);
  };
  for (const std::string& args : {std::string("prompt"), kFastA}) {  // each hit check
    SCOPED_TRACE(args);
    plant();
    Out run = worker(dir("a"), "off", args);
    ASSERT_EQ(run.status, 0) << run.text;
    EXPECT_EQ(result(run.text), result_a) << run.text;
    EXPECT_EQ(compiled(run), "1") << run.text;
    EXPECT_TRUE(has(run.text, "is another computation's")) << run.text;
    EXPECT_TRUE(local_a(dir("a")) != honest_b.raw);
  }
}

// A program compiled with other compiler settings, resealed under the key
// the victim's settings give the same trace: its own trace gives that key
// with the victim's settings, but its config is another's. Refused as
// another computation's (the program is what its own config compiled).
TEST_F(MixupTest, AnObjectOfAnotherConfigIsNotServed) {
  RedisServer server;
  const auto objects = [&] {
    std::set<std::string> out;
    for (const auto& k : server.keys())
      if (has(k, ":obj:") && !has(k, "#sig")) out.insert(k);
    return out;
  };
  Out x = worker(dir("x"), server.url(), "prompt --candidates 1");
  ASSERT_EQ(x.status, 0) << x.text;
  const std::set<std::string> first = objects();
  ASSERT_EQ(first.size(), 1u);
  Out y = worker(dir("y"), server.url(), "prompt");
  ASSERT_EQ(y.status, 0) << y.text;
  std::string obj_y;
  for (const auto& k : objects())
    if (!first.count(k)) obj_y = k;
  ASSERT_FALSE(obj_y.empty()) << "the other settings wrote no object of their own";
  const std::string obj_x = *first.begin();
  const std::string key_x = obj_x.substr(obj_x.rfind(':') + 1), key_y = obj_y.substr(obj_y.rfind(':') + 1);
  format::ObjectRecord o = format::decode_remote_object(server.command({"GET", obj_x}), "", key_x, kMaxObject);
  o.graph_key = key_y;
  ASSERT_EQ(server.command({"SET", obj_y, format::encode_remote_object(o)}), "OK");
  Out n = worker(dir("n"), server.url(), "prompt");
  ASSERT_EQ(n.status, 0) << n.text;
  EXPECT_EQ(compiled(n), "1") << "another config's program was served\n" << n.text;
  EXPECT_TRUE(has(n.text, "was compiled with config")) << n.text;
  EXPECT_EQ(corrupt(dir("n")), 1u);
  EXPECT_EQ(result(n.text), result(y.text));
}
