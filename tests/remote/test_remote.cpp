// The remote tier against a real redis-server (tests/support/redis_server.h,
// started on 127.0.0.1 at a free port and killed after each test): a cache
// warmed through the remote serves an empty one without compiling, and a
// remote that is killed, stopped, full, damaged, behind a wrong password or
// written by two jobs at once never fails a job; read-only never writes;
// the commands push, pull and list. Jobs run as separate processes
// (cache_worker, the npucache command), as users run them.
#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/remote_options.h"
#include "format/remote_value.h"
#include "remote/backend.h"
#include "remote/config.h"
#include "remote/redis.h"
#include "storage/remote_tier.h"
#include "support/cache_files.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

using namespace npucache;
namespace fs = std::filesystem;
using testing_support::has;
using testing_support::Out;
using testing_support::RedisServer;
using testing_support::sh;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Each test's caches are directories of `base`, named: dir("a") (which
// hides TempDirTest's `dir`).
class RemoteTest : public testing_support::TempDirTest {
 protected:
  RemoteTest() : TempDirTest("remote") {}
  std::string dir(const std::string& name) const { return (base / name).string(); }
  // A cache_worker run of the seed model's prompt with the remote `url`.
  Out worker(const std::string& d, const std::string& url, const std::string& env = "",
             const std::string& args = "prompt") const {
    return sh(env + " NPUCACHE_REMOTE='" + url + "' " + CACHE_WORKER + " run " + d + " seed " + args);
  }
  nlohmann::json stats(const std::string& d) const {
    Out o = sh(std::string(NPUCACHE_CLI) + " stats " + d + " --json");
    EXPECT_EQ(o.status, 0) << o.text;
    return nlohmann::json::parse(o.text.substr(o.text.find('{')));
  }
  static std::string result(const std::string& t) { return t.substr(t.find("result")); }
};

std::string compiled(const Out& o) {
  const auto at = o.text.find("compiled ");
  return at == std::string::npos ? "?" : o.text.substr(at + 9, o.text.find('\n', at) - at - 9);
}

uint64_t remote_errors(const nlohmann::json& s, const std::string& kind) {
  const auto& e = s["remote"]["errors"];
  return e.contains(kind) ? e[kind].get<uint64_t>() : 0;
}

}  // namespace

TEST(RemoteUrl, ParsesEveryForm) {
  auto c = remote::parse_url(
      "redis://cache.example:7000/3?read-only&timeout=250ms&connect-timeout=0.05&max-object=2M&list-timeout=90s");
  EXPECT_EQ(c.endpoint.host, "cache.example");
  EXPECT_EQ(c.endpoint.port, 7000);
  EXPECT_EQ(c.endpoint.db, 3);
  EXPECT_TRUE(c.read_only);
  EXPECT_DOUBLE_EQ(c.timeout_s, 0.25);
  EXPECT_DOUBLE_EQ(c.connect_timeout_s, 0.05);
  EXPECT_DOUBLE_EQ(c.list_timeout_s, 90.0);
  EXPECT_EQ(c.max_object_bytes, std::size_t{2} << 20);
  auto d = remote::parse_url("redis://127.0.0.1");
  EXPECT_EQ(d.endpoint.port, 6379);
  EXPECT_FALSE(d.read_only);
  EXPECT_DOUBLE_EQ(d.connect_timeout_s, remote::kDefaultConnectTimeoutS);
  EXPECT_DOUBLE_EQ(d.list_timeout_s, remote::kDefaultListTimeoutS);
  auto u = remote::parse_url("redis+unix:///run/redis/redis.sock?db=2");
  EXPECT_TRUE(u.endpoint.unix_socket);
  EXPECT_EQ(u.endpoint.path, "/run/redis/redis.sock");
  EXPECT_EQ(u.endpoint.db, 2);
  auto p = remote::parse_url("redis://alice:s%40cret@[::1]:6380");
  EXPECT_EQ(p.endpoint.user, "alice");
  EXPECT_EQ(p.endpoint.password, "s@cret");
  EXPECT_EQ(p.endpoint.host, "::1");
  EXPECT_EQ(p.endpoint.port, 6380);
  EXPECT_TRUE(p.password_in_url);
  EXPECT_EQ(p.url.find("s%40cret"), std::string::npos) << p.url;  // never shown
  auto f = remote::parse_url("file:///shared/npu%20cache?read-only&max-object=1M");
  EXPECT_EQ(f.scheme, remote::Scheme::file);
  EXPECT_EQ(f.endpoint.path, "/shared/npu cache");
  EXPECT_TRUE(f.read_only);
  EXPECT_EQ(f.max_object_bytes, std::size_t{1} << 20);
  EXPECT_EQ(remote::parse_url("unix:///run/r.sock").scheme, remote::Scheme::redis);
  // Each error names the part that is wrong; a password is never shown.
  const std::pair<const char*, const char*> bad[] = {
      {"http://x:1", "unknown scheme 'http'"},
      {"cache.example:6379", "no scheme"},
      {"redis://", "no host"},
      {"redis://h:0", "port '0'"},
      {"redis://h:99999", "port '99999'"},
      {"redis://h:1/x", "'/x' is not a database number"},
      {"redis+unix://relative.sock", "socket path 'relative.sock'"},
      {"file://relative/dir", "directory 'relative/dir' must be absolute"},
      {"file:///d?db=1", "db is an attribute of redis:// remotes only"},
      {"redis://h?timeout=-1", "timeout '-1'"},
      {"redis://h?colour=blue", "unknown attribute 'colour'"},
      {"redis://h?max-object=lots", "max-object 'lots'"},
      {"redis://alice:pa55word@h:0", "port '0'"},
      {"redis://:pa55word@h?timeout=x", "timeout 'x'"},
      {"redis://pa55word@h?colour=blue", "unknown attribute"},
      {"redis://alice:pa/55word@h:0", "remote cache URL"},
  };
  for (const auto& [url, part] : bad) {
    try {
      remote::parse_url(url);
      ADD_FAILURE() << url << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(has(e.what(), "remote cache URL")) << e.what();
      EXPECT_TRUE(has(e.what(), part)) << e.what();
      EXPECT_FALSE(has(e.what(), "pa55word")) << e.what();
      EXPECT_FALSE(has(e.what(), "55word")) << e.what();
    }
  }
  EXPECT_EQ(remote::shown_url("redis://alice:pa55word@h:1/2"), "redis://alice:***@h:1/2");
  EXPECT_EQ(remote::shown_url("file:///a@b"), "file:///a@b");
}

TEST(RemoteValue, EveryDamageIsRefused) {
  cache::ObjectRecord o;
  o.graph_key = std::string(32, 'a');
  o.raw = std::string(5000, 'x');
  o.meta.raw_size = o.raw.size();
  o.meta.checksum = cache::checksum(o.raw);
  const std::string v = cache::encode_remote_object(o);
  const std::string h = cache::content_hash(v);
  EXPECT_EQ(cache::decode_remote_object(v, h, o.graph_key, 1 << 20).raw, o.raw);
  for (std::size_t at : {std::size_t{0}, std::size_t{9}, std::size_t{20}, std::size_t{47}, v.size() - 1}) {
    std::string bad = v;
    bad[at] ^= 0x20;
    EXPECT_THROW(cache::decode_remote_object(bad, h, o.graph_key, 1 << 20), Error) << at;
    EXPECT_THROW(cache::decode_remote_object(bad, "", o.graph_key, 1 << 20), Error) << at;  // without the key's check
  }
  EXPECT_THROW(cache::decode_remote_object(v.substr(0, v.size() / 2), "", o.graph_key, 1 << 20), Error);
  EXPECT_THROW(cache::decode_remote_object(v, h, std::string(32, 'b'), 1 << 20), Error);  // another key
  EXPECT_THROW(cache::decode_remote_object(v, h, o.graph_key, 100), Error);               // above the cap
  EXPECT_THROW(cache::decode_remote_entry(v, "", ""), Error);                             // another kind
}

TEST_F(RemoteTest, WarmRemoteServesAnEmptyCacheWithoutCompiling) {
  RedisServer server;
  Out cold = worker(dir("a"), server.url());
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_EQ(compiled(cold), "1") << cold.text;
  EXPECT_FALSE(server.keys().empty());
  // Another host's empty cache: served by the remote, no compile.
  Out fresh = worker(dir("b"), server.url());
  ASSERT_EQ(fresh.status, 0) << fresh.text;
  EXPECT_EQ(compiled(fresh), "0") << fresh.text;
  EXPECT_TRUE(has(fresh.text, "status hit")) << fresh.text;
  EXPECT_TRUE(has(fresh.text, "read from the remote cache")) << fresh.text;
  EXPECT_EQ(result(fresh.text), result(cold.text));
  // It was committed locally: the next start needs no remote at all.
  server.kill();
  Out local = worker(dir("b"), "off");
  EXPECT_TRUE(has(local.text, "compiled 0\nstatus hit")) << local.text;
  EXPECT_TRUE(has(local.text, ") loaded from ")) << local.text;
  EXPECT_EQ(result(local.text), result(cold.text));
  const auto s = stats(dir("b"));
  EXPECT_EQ(s["remote"]["hits"].get<uint64_t>(), 1u) << s.dump();
  EXPECT_GT(s["remote"]["bytes_read"].get<uint64_t>(), 0u);
  const auto sa = stats(dir("a"));
  EXPECT_GT(sa["remote"]["writes"].get<uint64_t>(), 0u) << sa.dump();
}

TEST_F(RemoteTest, NoRemoteMeansNoConnection) {
  RedisServer server;
  const std::string before = server.command({"INFO", "stats"});
  const auto connections = [&](const std::string& info) {
    const auto at = info.find("total_connections_received:");
    return std::stol(info.substr(at + 27));
  };
  Out o = sh(std::string("unset NPUCACHE_REMOTE; ") + CACHE_WORKER + " run " + dir("a") + " seed prompt");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(connections(server.command({"INFO", "stats"})), connections(before) + 1);  // only this INFO's
  std::ifstream f(dir("a") + "/stats.json");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "\"hits\"")) << text;
  EXPECT_FALSE(has(text, "\"remote\"")) << text;  // no remote call was counted
  EXPECT_EQ(cache::RemoteTier::get(cache::resolve_remote({})), nullptr);
}

TEST_F(RemoteTest, StoppedServerCostsOneTimeout) {
  RedisServer server;
  ASSERT_EQ(worker(dir("a"), server.url()).status, 0);
  server.stop();  // SIGSTOP: connections are accepted by the kernel, nothing answers
  const auto t0 = Clock::now();
  Out o = worker(dir("b"), server.url("timeout=1"));
  const double took = since(t0);
  server.resume();
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(compiled(o), "1") << o.text;
  EXPECT_TRUE(has(o.text, "did not answer in time")) << o.text;
  EXPECT_LT(took, 8.0) << o.text;  // one 1 s timeout, then the remote is skipped
  const auto s = stats(dir("b"));
  EXPECT_EQ(remote_errors(s, "timeout"), 1u) << s.dump();
}

TEST_F(RemoteTest, KilledServerMidJobNeverFailsTheJob) {
  RedisServer server;
  ASSERT_EQ(worker(dir("a"), server.url()).status, 0);
  server.stop();  // the job's first remote call waits inside the server...
  const std::string cmd = std::string("NPUCACHE_REMOTE='") + server.url("timeout=5") + "' " + CACHE_WORKER + " run " +
                          dir("b") + " seed prompt > " + dir("out") + " 2>&1";
  const auto t0 = Clock::now();
  std::thread job([&] { std::system(cmd.c_str()); });
  // Once the job's connection is up (the kernel accepts it for the stopped
  // server) and its command sent, the server dies under it.
  const auto connected = [&] {
    std::ifstream tcp("/proc/net/tcp");
    char port[8];
    std::snprintf(port, sizeof port, ":%04X", server.port());
    std::string line;
    while (std::getline(tcp, line)) {
      std::istringstream in(line);
      std::string sl, local, rem, st;
      in >> sl >> local >> rem >> st;
      if (rem.size() > 5 && rem.substr(rem.size() - 5) == port && st == "01") return true;
    }
    return false;
  };
  while (!connected() && since(t0) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto killed = Clock::now();
  server.kill();
  job.join();
  std::ifstream f(dir("out"));
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "compiled 1\nstatus compiled")) << text;
  EXPECT_TRUE(has(text, "dropped the connection")) << text;
  EXPECT_LT(since(killed), 4.0) << text;  // the drop ended the wait, not the 5 s timeout
  EXPECT_EQ(remote_errors(stats(dir("b")), "dropped"), 1u);
}

namespace {

// A TCP proxy in front of the server that passes the client's bytes and
// the first `pass` bytes of the server's, then stalls (a server stopped
// mid-transfer) or closes both sides (a connection dropped mid-transfer);
// `at_pass` (when given) runs once when the server's bytes reach `pass`,
// and then the proxy passes everything on.
class Proxy {
 public:
  Proxy(int server_port, std::size_t pass, bool close, std::function<void()> at_pass = {})
      : pass_(pass), close_(close), at_pass_(std::move(at_pass)) {
    port_ = testing_support::free_port();
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 4) != 0)
      throw std::runtime_error("proxy: cannot listen");
    thread_ = std::thread([this, server_port] { run(server_port); });
  }
  ~Proxy() {
    stop_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    thread_.join();
    ::close(listen_);
  }
  int port() const { return port_; }

 private:
  void run(int server_port) {
    pollfd lp{listen_, POLLIN, 0};
    while (!stop_ && ::poll(&lp, 1, 50) == 0) {
    }
    if (stop_) return;
    const int c = ::accept(listen_, nullptr, nullptr);
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(server_port));
    ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    std::size_t passed = 0;
    char buf[65536];
    while (!stop_) {
      const bool open = passed < pass_ || at_pass_;
      pollfd p[2] = {{c, POLLIN, 0}, {s, static_cast<short>(open ? POLLIN : 0), 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      if (p[0].revents & (POLLIN | POLLHUP)) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        (void)!::write(s, buf, static_cast<std::size_t>(n));
      }
      if (p[1].revents & POLLIN) {
        const ssize_t n = ::read(s, buf, at_pass_ ? sizeof buf : std::min(sizeof buf, pass_ - passed));
        if (n <= 0) break;
        (void)!::write(c, buf, static_cast<std::size_t>(n));
        const bool reached = passed < pass_ && passed + static_cast<std::size_t>(n) >= pass_;
        passed += static_cast<std::size_t>(n);
        if (reached && at_pass_) at_pass_();
        if (passed >= pass_ && close_) break;
      }
    }
    ::close(c);
    ::close(s);
  }
  std::size_t pass_;
  bool close_;
  std::function<void()> at_pass_;
  int port_ = 0, listen_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A tier for `port` with a 1 s operation timeout.
cache::RemoteTier tier_at(int port, const std::string& attrs = "timeout=1") {
  return cache::RemoteTier(
      remote::make_redis_backend(remote::parse_url("redis://127.0.0.1:" + std::to_string(port) + "?" + attrs)));
}

// An object of `n` bytes stored under its graph key through `t`.
cache::ObjectRecord stored_object(cache::RemoteTier& t, std::size_t n) {
  cache::ObjectRecord o;
  o.graph_key = "0123456789abcdef0123456789abcdef";
  std::string raw(n, '\0');
  std::mt19937_64 random(42);
  for (auto& c : raw) c = static_cast<char>(random());  // incompressible: the value is as large as the object
  o.raw = std::move(raw);
  o.meta.raw_size = o.raw.size();
  o.meta.checksum = cache::checksum(o.raw);
  EXPECT_EQ(t.push({o}, {}, "").objects, 1u);
  return o;
}

}  // namespace

TEST_F(RemoteTest, StalledOrDroppedMidTransferEndsInTime) {
  RedisServer server;
  auto direct = tier_at(server.port());
  const cache::ObjectRecord o = stored_object(direct, 8 << 20);
  ASSERT_TRUE(direct.object(o.graph_key, "").has_value());
  for (bool close : {false, true}) {
    Proxy proxy(server.port(), 1 << 20, close);  // 1 MiB of the object, then trouble
    auto t = tier_at(proxy.port());
    const auto t0 = Clock::now();
    EXPECT_FALSE(t.object(o.graph_key, dir("s")).has_value());
    const double took = since(t0);
    EXPECT_LT(took, 1.9) << (close ? "dropped" : "stalled");  // within the 1 s timeout (and its poll slack)
    if (!close) {
      EXPECT_GT(took, 0.9);
    }
    // The remote is skipped from now on: no second wait.
    const auto t1 = Clock::now();
    EXPECT_FALSE(t.object(o.graph_key, "").has_value());
    EXPECT_LT(since(t1), 0.05);
    auto again = t.backend().get("x");
    ASSERT_TRUE(again.is_failure());
    EXPECT_EQ(again.fault().kind, close ? remote::Failure::dropped : remote::Failure::timeout);
  }
}

TEST_F(RemoteTest, ServerStoppedMidTransferCostsOneTimeout) {
  RedisServer server;
  auto direct = tier_at(server.port(), "timeout=30");
  const cache::ObjectRecord o = stored_object(direct, 48 << 20);  // more than socket buffers hold
  // The real server receives SIGSTOP once 1 MiB of the object has reached the client.
  Proxy proxy(server.port(), 1 << 20, false, [&] { server.stop(); });
  auto t = tier_at(proxy.port());
  const auto t0 = Clock::now();
  EXPECT_FALSE(t.object(o.graph_key, dir("s")).has_value());
  const double took = since(t0);
  server.resume();
  EXPECT_GT(took, 0.9);
  EXPECT_LT(took, 1.9);  // the 1 s timeout (and its poll slack), not the server's pause
  auto again = t.backend().get("x");
  ASSERT_TRUE(again.is_failure());
  EXPECT_EQ(again.fault().kind, remote::Failure::timeout);
}

TEST_F(RemoteTest, FullRemoteStopsWritesNotReads) {
  RedisServer server({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
  ASSERT_EQ(worker(dir("a"), server.url()).status, 0);  // warm while there is room
  // Fill it up, in small values, until the server refuses writes.
  remote::Endpoint e;
  e.host = "127.0.0.1";
  e.port = server.port();
  remote::RedisConnection conn(e, 2.0, 10.0);
  const std::string junk(2048, 'j');
  bool full = false;
  for (int batch = 0; batch < 100 && !full; ++batch) {
    std::vector<std::string> keys;
    for (int i = 0; i < 100; ++i) keys.push_back("junk" + std::to_string(batch * 100 + i));
    std::vector<remote::Command> cmds;
    for (const auto& k : keys) cmds.push_back({"SET", k, junk});
    for (const auto& r : conn.run(cmds, 10.0)) full = full || r.type() == remote::Reply::Type::error;
  }
  ASSERT_TRUE(full);
  // A job with another model compiles and tries to write back: full.
  Out o = worker(dir("b"), server.url(), "", "prompt --other");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(compiled(o), "1") << o.text;
  EXPECT_TRUE(has(o.text, "is full and refuses writes")) << o.text;
  EXPECT_EQ(remote_errors(stats(dir("b")), "full"), 1u);
  // Reads go on.
  Out r = worker(dir("c"), server.url());
  EXPECT_EQ(compiled(r), "0") << r.text;
}

TEST_F(RemoteTest, DamagedValuesAreNeverUsedAndAreReplaced) {
  RedisServer server;
  Out cold = worker(dir("a"), server.url());
  ASSERT_EQ(cold.status, 0);
  std::string obj_key;
  for (const auto& k : server.keys())
    if (has(k, ":obj:")) obj_key = k;
  ASSERT_FALSE(obj_key.empty());
  const std::string value = server.command({"GET", obj_key});
  for (const std::string& damaged :
       {value.substr(0, value.size() / 2), value.substr(0, 100) + "X" + value.substr(101)}) {
    ASSERT_EQ(server.command({"SET", obj_key, damaged}), "OK");
    const std::string d = dir("d" + std::to_string(damaged.size()));
    Out o = worker(d, server.url());
    ASSERT_EQ(o.status, 0) << o.text;
    EXPECT_EQ(compiled(o), "1") << o.text;  // never served
    EXPECT_TRUE(has(o.text, "holds a damaged value")) << o.text;
    EXPECT_EQ(result(o.text), result(cold.text));
    EXPECT_EQ(remote_errors(stats(d), "corrupt"), 1u);
    // The damaged value was removed and the compile wrote a good one back.
    Out next = worker(dir("n" + std::to_string(damaged.size())), server.url());
    EXPECT_EQ(compiled(next), "0") << next.text;
    for (const auto& k : server.keys())
      if (has(k, ":obj:")) obj_key = k;
  }
}

// Values of format 3.0.0 (tests/fixtures/format-3.0.0/remote) under this
// version's keys (its own keys, npucache:3.0.0:..., are never read): an
// entry and an object of value encoding 1 are refused naming their
// encoding, counted as corrupt and never served, on the default hit check
// and the fast path; the job compiles and writes back.
TEST_F(RemoteTest, PreviousFormatValuesAreNeverServed) {
  const fs::path old = fs::path(FIXTURES) / "format-3.0.0" / "remote";
  std::string old_entry, old_graph, old_object;
  for (const auto& f : fs::directory_iterator(old)) {
    std::ifstream in(f.path(), std::ios::binary);
    std::string v{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string name = f.path().filename().string();
    (name == "entry.bin" ? old_entry : name.rfind("graph-", 0) == 0 ? old_graph : old_object) = std::move(v);
  }
  ASSERT_FALSE(old_entry.empty() || old_graph.empty() || old_object.empty());
  for (const std::string args : {"prompt", "prompt --fast --code-version v1"}) {
    RedisServer server;
    Out cold = worker(dir("a"), server.url(), "", args);
    ASSERT_EQ(cold.status, 0) << cold.text;
    const auto entries = testing_support::entries(dir("a"));
    ASSERT_EQ(entries.size(), 1u);
    int planted = 0;
    for (const auto& k : server.keys()) {
      ASSERT_EQ(k.rfind(cache::remote_key::prefix(), 0), 0u) << k;
      if (has(k, ":obj:")) planted += server.command({"SET", k, old_object}) == "OK";
      if (has(k, ":entry:")) planted += server.command({"SET", k, old_entry}) == "OK";
    }
    ASSERT_EQ(planted, 2);
    const std::string d = dir(args == "prompt" ? "b" : "c");
    Out o = worker(d, server.url(), "", args);
    ASSERT_EQ(o.status, 0) << o.text;
    EXPECT_EQ(compiled(o), "1") << args << ": " << o.text;  // never served
    EXPECT_TRUE(has(o.text, "value encoding 1 (this build reads 2; it was written by cache format 3.0.0 or earlier)"))
        << args << ": " << o.text;
    EXPECT_EQ(result(o.text), result(cold.text));
    EXPECT_GE(remote_errors(stats(d), "corrupt"), 1u) << args;
    fs::remove_all(dir("a"));
  }
}

TEST_F(RemoteTest, WrongPasswordIsWarnedAndCountedRightOneWorks) {
  RedisServer server({"--requirepass", "s3cret"});
  Out none = worker(dir("a"), server.url());
  ASSERT_EQ(none.status, 0) << none.text;
  EXPECT_EQ(compiled(none), "1");
  EXPECT_TRUE(has(none.text, "refused the credentials")) << none.text;
  Out wrong = worker(dir("b"), server.url(), "NPUCACHE_REMOTE_PASSWORD=wrong");
  EXPECT_EQ(compiled(wrong), "1");
  EXPECT_TRUE(has(wrong.text, "refused the credentials")) << wrong.text;
  EXPECT_EQ(remote_errors(stats(dir("b")), "auth"), 1u);
  EXPECT_TRUE(server.keys("s3cret").empty());
  { std::ofstream(dir("pw")) << "s3cret\n"; }
  Out file = worker(dir("c"), server.url(), "NPUCACHE_REMOTE_PASSWORD_FILE=" + dir("pw"));
  EXPECT_EQ(compiled(file), "1") << file.text;
  EXPECT_FALSE(has(file.text, "refused the credentials")) << file.text;
  EXPECT_FALSE(server.keys("s3cret").empty());
  // A password file of the environment that cannot be read never stops a
  // job: warned about, and the job runs with its local cache.
  Out unreadable = worker(dir("e"), server.url(), "NPUCACHE_REMOTE_PASSWORD_FILE=" + dir("no-such-file"));
  ASSERT_EQ(unreadable.status, 0) << unreadable.text;
  EXPECT_EQ(compiled(unreadable), "1") << unreadable.text;
  EXPECT_TRUE(has(unreadable.text, "cannot be read")) << unreadable.text;
  EXPECT_TRUE(has(unreadable.text, "is not used")) << unreadable.text;
  Out url = worker(dir("d"), "redis://:s3cret@127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(compiled(url), "0") << url.text;  // served by the remote
  EXPECT_TRUE(has(url.text, "carries a password")) << url.text;
  EXPECT_FALSE(has(url.text, "s3cret")) << url.text;  // never printed
}

TEST_F(RemoteTest, TwoJobsWritingTheSameKeysAtOnce) {
  RedisServer server;
  Out a, b;
  std::thread ta([&] { a = worker(dir("a"), server.url()); });
  std::thread tb([&] { b = worker(dir("b"), server.url()); });
  ta.join();
  tb.join();
  ASSERT_EQ(a.status, 0) << a.text;
  ASSERT_EQ(b.status, 0) << b.text;
  EXPECT_EQ(result(a.text), result(b.text));
  int objects = 0;
  for (const auto& k : server.keys()) objects += has(k, ":obj:");
  EXPECT_EQ(objects, 1);  // one graph key, written once
  Out c = worker(dir("c"), server.url());
  EXPECT_EQ(compiled(c), "0") << c.text;
  EXPECT_EQ(result(c.text), result(a.text));
}

TEST_F(RemoteTest, ReadOnlyNeverWrites) {
  RedisServer server;
  Out o = worker(dir("a"), server.url("read-only"));
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(compiled(o), "1");
  EXPECT_TRUE(server.keys().empty());
  // A consumer reads what a producer wrote, and still writes nothing.
  ASSERT_EQ(worker(dir("p"), server.url()).status, 0);
  const auto before = server.keys().size();
  Out c = worker(dir("c"), server.url("read-only"), "", "prompt --other");
  EXPECT_EQ(compiled(c), "1");
  EXPECT_EQ(server.keys().size(), before);
  Out d = worker(dir("d"), server.url("read-only"));
  EXPECT_EQ(compiled(d), "0") << d.text;
  EXPECT_EQ(server.keys().size(), before);
}

TEST_F(RemoteTest, PushListPull) {
  RedisServer server;
  ASSERT_EQ(worker(dir("a"), "off").status, 0);
  ASSERT_EQ(worker(dir("a"), "off", "", "decode").status, 0);
  const std::string cli = std::string(NPUCACHE_CLI);
  Out push = sh(cli + " remote push " + dir("a") + " --remote " + server.url());
  ASSERT_EQ(push.status, 0) << push.text;
  EXPECT_TRUE(has(push.text, "pushed 2 entries, 1 objects")) << push.text;
  Out again = sh(cli + " remote push " + dir("a") + " --remote " + server.url());
  EXPECT_TRUE(has(again.text, "1 objects were there already")) << again.text;
  Out ls = sh(cli + " remote ls --json --remote " + server.url());
  ASSERT_EQ(ls.status, 0) << ls.text;
  const auto j = nlohmann::json::parse(ls.text.substr(ls.text.find('{')));
  EXPECT_EQ(j["entries"].get<int>(), 2);
  EXPECT_EQ(j["objects"].get<int>(), 1);
  EXPECT_GT(j["bytes"].get<int>(), 0);
  const std::string model = j["models"][0]["model_info"].get<std::string>();
  Out pull = sh(cli + " remote pull Model " + dir("b") + " --remote " + server.url());
  ASSERT_EQ(pull.status, 0) << pull.text;
  EXPECT_TRUE(has(pull.text, "pulled 2 entries, 1 objects")) << pull.text;
  server.kill();
  Out warm = worker(dir("b"), "off", "", "decode");
  EXPECT_TRUE(has(warm.text, "compiled 0\nstatus hit")) << warm.text;
  Out verify = sh(cli + " verify " + dir("b"));
  EXPECT_EQ(verify.status, 0) << verify.text;
  // Without a reachable remote a command fails, naming why.
  Out down = sh(cli + " remote ls --remote " + server.url("connect-timeout=100ms"));
  EXPECT_EQ(down.status, 1) << down.text;
  EXPECT_TRUE(has(down.text, "cannot be reached")) << down.text;
  Out none = sh("unset NPUCACHE_REMOTE; " + cli + " remote ls");
  EXPECT_EQ(none.status, 2) << none.text;
  (void)model;
}

// An unsigned remote's entries are claims (remote::Backend::authenticated):
// the fast path does not take them, traces once and reads the object of
// its own graph key.
TEST_F(RemoteTest, FastPathTracesOnAnUnsignedRemote) {
  RedisServer server;
  const std::string fast = "prompt --fast --code-version v1";
  Out cold = worker(dir("a"), server.url(), "", fast);
  ASSERT_EQ(cold.status, 0) << cold.text;
  Out fresh = worker(dir("b"), server.url(), "", fast);
  EXPECT_TRUE(has(fresh.text, "traced 1\ncompiled 0\nstatus hit")) << fresh.text;
  EXPECT_TRUE(has(fresh.text, "is not signed: the code_version hit check does not take its entries")) << fresh.text;
  EXPECT_EQ(result(fresh.text), result(cold.text));
  // Committed locally: the next start decides without a trace.
  Out local = worker(dir("b"), "off", "", fast);
  EXPECT_TRUE(has(local.text, "traced 0\ncompiled 0\nstatus hit")) << local.text;
  // Another code_version is not served from it.
  Out other = worker(dir("c"), server.url(), "", "prompt --fast --code-version v2");
  EXPECT_TRUE(has(other.text, "traced 1")) << other.text;
}

// Two kinds of device sharing one Redis, each start on an empty cache
// directory (new hosts): each kind's templates are kept side by side, so
// every start after a kind's first restores its captures.
TEST_F(RemoteTest, TwoDeviceKindsShareOneRedisWithoutRecapturing) {
  RedisServer server;
  auto on = [&](const std::string& memory, const std::string& d) {
    return sh("NPUCACHE_SIM_DEVICE_MEMORY=" + memory + " NPUCACHE_REMOTE='" + server.url() + "' " +
              std::string(SERVE_WORKER) + " " + dir(d) + " --mode reduce-overhead --dynamic true --batches 4,8");
  };
  Out a = on("4G", "a1");
  ASSERT_EQ(a.status, 0) << a.text;
  EXPECT_TRUE(testing_support::has(a.text, "templates recorded 2 restored 0")) << a.text;
  Out b = on("8G", "b1");
  ASSERT_EQ(b.status, 0) << b.text;
  EXPECT_TRUE(testing_support::has(b.text, "templates recorded 2 restored 0")) << b.text;
  for (int round = 2; round <= 3; ++round)
    for (const std::string kind : {"a", "b"}) {
      Out r = on(kind == "a" ? "4G" : "8G", kind + std::to_string(round));
      ASSERT_EQ(r.status, 0) << r.text;
      EXPECT_TRUE(testing_support::has(r.text, "templates recorded 0 restored 2 recaptured 0")) << kind << round << "\n"
                                                                                                << r.text;
      EXPECT_TRUE(testing_support::has(r.text, "maxdiff 0\n")) << r.text;
    }
}

// The compile surface's shared state through the remote tier: a host with
// an empty cache directory restores the captures another host made (capture
// templates) and compiles the dynamic version at once (the dynamic-shape
// profile), zero captures and one compile in all.
TEST_F(RemoteTest, TemplatesAndProfilesReachAnEmptyHost) {
  RedisServer server;
  auto serve = [&](const std::string& d, const std::string& args) {
    return sh("NPUCACHE_REMOTE='" + server.url() + "' " + std::string(SERVE_WORKER) + " " + d + " " + args);
  };
  const std::string args = "--mode reduce-overhead --dynamic auto --batches 4,8,16";
  Out first = serve(dir("a"), args);
  ASSERT_EQ(first.status, 0) << first.text;
  EXPECT_TRUE(testing_support::has(first.text, "dynamic arg0 dim 0")) << first.text;
  Out fresh = serve(dir("b"), args);
  ASSERT_EQ(fresh.status, 0) << fresh.text;
  EXPECT_TRUE(testing_support::has(fresh.text, "compiles 0")) << fresh.text;  // the dynamic object is remote too
  // Batch 4's capture too: the first host made the dynamic program's
  // template for the shape it had captured on the static one.
  EXPECT_TRUE(testing_support::has(fresh.text, "templates recorded 0 restored 3")) << fresh.text;
  EXPECT_TRUE(testing_support::has(fresh.text, "maxdiff 0\n")) << fresh.text;
  EXPECT_TRUE(fs::exists(fs::path(dir("b")) / "templates")) << "the remote's templates are kept locally";
  // Only the profile from the remote: the dynamic program is compiled at
  // once (one compile, not two).
  Out profiled = sh("NPUCACHE_REMOTE='" + server.url() + "' " + std::string(SERVE_WORKER) + " " + dir("c") + " " +
                    args + ",32 --scale 2");  // another graph of the same model: no object remote
  ASSERT_EQ(profiled.status, 0) << profiled.text;
  EXPECT_TRUE(testing_support::has(profiled.text, "compiles 1")) << profiled.text;
  EXPECT_TRUE(testing_support::has(profiled.text, "dynamic arg0 dim 0")) << profiled.text;
}
