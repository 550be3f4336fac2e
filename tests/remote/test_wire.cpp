// What the remote tier says and reads: a URL's password is never printed,
// whatever is malformed around it; a malformed $NPUCACHE_REMOTE is warned
// about once and the job runs with the local cache, one set in code is a
// ConfigError; and a server on the remote's port that announces huge or
// malformed replies (a fake one, a thread of the test) makes every call a
// failed remote operation, counted, with nothing allocated for what never
// arrived, through the tier and through a cache_compile job. A cache filled
// by `npucache import` or `remote pull` starts warm: a method with automatic
// dynamic compiles nothing, and the tuning decisions arrive.
#include <npucache/error.h>
#include <npucache/npucache.h>

#include "cache/remote_options.h"
#include "format/bundle.h"
#include "format/names.h"
#include "format/remote_value.h"
#include "format/tuning_file.h"
#include "process/process_models.h"
#include "remote/backend.h"
#include "remote/config.h"
#include "remote/redis.h"
#include "remote/resp_reader.h"
#include "storage/remote_tier.h"
#include "storage/stats.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir_test.h"
#include "zstd/zstd_codec.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

using namespace npucache;
using testing_support::Hooked;
using testing_support::hooked_input;
using testing_support::hooked_options;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The pieces of every test password: none may show in any message.
const char* const kPieces[] = {"Zq9", "Xw7", "Kp3", "Rt5", "Vb1"};
std::string leaked(const std::string& text) {
  for (const char* p : kPieces)
    if (has(text, p)) return p;
  return "";
}

// The test's passwords: each character a parser may take for a delimiter.
const char* const kPasswords[] = {
    "Zq9Xw7", "Zq9/Xw7", "Zq9?Xw7", "Zq9#Xw7", "Zq9@Xw7", "Zq9:Xw7", "Zq9%2FXw7", "Zq9&Xw7=", "Zq9?Xw7/Kp3#Rt5@Vb1"};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size()))
    s.replace(i, from.size(), to);
  return s;
}

TEST(RemoteUrlSecrets, NoMessageShowsThePassword) {
  // PW stands for each password.
  const char* const malformed[] = {
      "redis://u:PW@host:99999",
      "redis://u:PW@host:abc",
      "redis://u:PW@host:0/1",
      "redis://PW@host:99999",  // a user part without ':' is a password
      "redis://u:PW@host:6379?colour=blue",
      "redis://u:PW@host:6379?timeout=forever",
      "redis://u:PW@host:6379?connect-timeout=-1",
      "redis://u:PW@host:6379?max-object=lots",
      "redis://u:PW@host:6379?read-only=maybe",
      "redis://u:PW@host:6379?db=x",
      "redis://u:PW@host:6379/notadb",
      "redis://u:PW%zz@host",
      "redis://u:PW%4@host",
      "redis://u:PW%@host",
      "redis://u:PW@",
      "redis://u:PW@:6379",
      "redis://u:PW@[::1",
      "redis://u:PW@[::1]x",
      "redis+unix://u:PW@/run/redis.sock",
      "unix://u:PW@relative.sock",
      "file://u:PW@/shared/dir",
      "file://u:PW@/shared/dir?db=1",
      "u:PW@host:6379",
      "rediss://u:PW@host",
      "redis:/u:PW@host",
  };
  int cases = 0, skipped = 0;
  for (const char* pw : kPasswords)
    for (const char* pattern : malformed) {
      // user:password@ without a user: the first ':' ends a user name, shown.
      if (has(pw, ":") && has(pattern, "//PW@")) {
        ++skipped;
        continue;
      }
      const std::string url = replace_all(pattern, "PW", pw);
      SCOPED_TRACE(url);
      try {
        (void)remote::parse_url(url);
        ADD_FAILURE() << "accepted";
      } catch (const ConfigError& e) {
        ++cases;
        const std::string what = e.what();
        EXPECT_EQ(leaked(what), "") << what;
        EXPECT_TRUE(has(what, "remote cache URL '")) << what;
        EXPECT_TRUE(has(what, ":***@") || has(what, "***")) << what;  // the masked form is shown
      }
      const std::string shown = remote::shown_url(url);
      EXPECT_EQ(leaked(shown), "") << shown;
    }
  EXPECT_EQ(cases + skipped, static_cast<int>(std::size(kPasswords) * std::size(malformed)));
}

TEST(RemoteUrlSecrets, PasswordsWithDelimitersParseAndShowMasked) {
  for (const char* pw : kPasswords) {
    SCOPED_TRACE(pw);
    const std::string url = std::string("redis://alice:") + pw + "@cache.example:6380/2?timeout=2s&read-only";
    const remote::Config c = remote::parse_url(url);
    std::string want = pw;
    want = replace_all(want, "%2F", "/");
    EXPECT_EQ(c.endpoint.password, want);
    EXPECT_EQ(c.endpoint.user, "alice");
    EXPECT_EQ(c.endpoint.host, "cache.example");
    EXPECT_EQ(c.endpoint.port, 6380);
    EXPECT_EQ(c.endpoint.db, 2);
    EXPECT_EQ(c.timeout_s, 2.0);
    EXPECT_TRUE(c.read_only);
    EXPECT_EQ(c.url, "redis://alice:***@cache.example:6380/2?timeout=2s&read-only");
  }
  EXPECT_EQ(remote::shown_url("redis://Zq9Xw7@h"), "redis://:***@h");
  EXPECT_EQ(remote::shown_url("Zq9:Xw7@h:1"), "Zq9:***@h:1");
}

// Sets an environment variable for a scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      ::unsetenv(name_);
    else
      ::setenv(name_, old_.c_str(), 1);
  }
  const char* name_;
  std::string old_;
};

bool close_to(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-5f * (1.0f + std::abs(b[i]))) return false;
  return true;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t i = text.find(part); i != std::string::npos; i = text.find(part, i + 1)) ++n;
  return n;
}

class RemoteWireTest : public testing_support::TempDirTest {
 protected:
  RemoteWireTest() : TempDirTest("wire") {}
};

TEST_F(RemoteWireTest, MalformedEnvironmentRemoteWarnsOnceAndRunsLocally) {
  const std::string url = "redis://u:Zq9?Xw7/Kp3@envhost:99999";
  ScopedEnv env("NPUCACHE_REMOTE", url);
  ::unsetenv("NPUCACHE_REMOTE_PASSWORD");
  testing::internal::CaptureStderr();
  const remote::Config none = cache::resolve_remote({});
  const remote::Config again = cache::resolve_remote({});
  Hooked m;
  CacheOptions o = hooked_options((base / "env").string(), "f");
  o.remote.url = "";  // from the environment
  auto fn = cache_compile(m, &Hooked::f, o);
  const std::vector<float> got = fn(hooked_input()).to_vector();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(none.enabled());
  EXPECT_FALSE(again.enabled());
  EXPECT_TRUE(close_to(got, Hooked().f(hooked_input()).to_vector()));
  EXPECT_EQ(fn.status().outcome, Outcome::compiled) << fn.status().reason;
  EXPECT_EQ(count(log, "NPUCACHE_REMOTE is not used"), 1u) << log;
  EXPECT_TRUE(has(log, "port '99999'")) << log;  // what is wrong
  EXPECT_TRUE(has(log, "redis://u:***@envhost:99999")) << log;
  EXPECT_TRUE(has(log, "local cache only")) << log;
  EXPECT_EQ(leaked(log), "") << log;
  // A second job of the process is served by the local cache it wrote.
  auto again_fn = cache_compile(m, &Hooked::f, o);
  (void)again_fn(hooked_input());
  EXPECT_EQ(again_fn.status().outcome, Outcome::hit) << again_fn.status().reason;
}

TEST_F(RemoteWireTest, MalformedRemoteInCodeIsAConfigError) {
  ScopedEnv env("NPUCACHE_REMOTE", "redis://127.0.0.1:6379");  // not used: the options name one
  RemoteOptions r;
  r.url = "redis://u:Zq9#Xw7@codehost:port";
  try {
    (void)cache::resolve_remote(r);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "port 'port'")) << e.what();
    EXPECT_EQ(leaked(e.what()), "") << e.what();
  }
  Hooked m;
  CacheOptions o = hooked_options((base / "code").string(), "f");
  o.remote.url = r.url;
  EXPECT_THROW(
      {
        auto fn = cache_compile(m, &Hooked::f, o);
        (void)fn(hooked_input());
      },
      ConfigError);
}

// A server on a loopback port that answers every command with `answer` and
// keeps the connection open until the client closes it: a client that
// waits for what was announced waits for its timeout.
class FakeServer {
 public:
  explicit FakeServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot listen on loopback");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  // timeout=3s: an answer the client waits out shows as a timeout.
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "?timeout=3s&connect-timeout=2s"; }
  int connections() const { return connections_.load(); }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      char buf[4096];
      while (!stop_) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 20) <= 0) continue;
        if (::recv(c, buf, sizeof buf, 0) <= 0) break;  // the client closed
        (void)::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    }
  }
  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

long peak_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

struct Hostile {
  const char* name;
  std::string answer;
  std::string detail;  // what the failure names
  // dropped: the remote is judged down; too_large: that value is not read,
  // the connection is opened again for the next call.
  remote::Failure kind = remote::Failure::dropped;
};

std::vector<Hostile> hostile_answers() {
  return {
      {"huge array", "*2147483647\r\n", "2147483647 elements"},
      {"huge string", "$2147483647\r\n", "2147483647 bytes", remote::Failure::too_large},
      {"string above max-object", "$80000000\r\nxxxxxxxx", "80000000 bytes", remote::Failure::too_large},
      {"huge array in an array", "*2\r\n*2147483647\r\n", "2147483647 elements"},
      {"arrays nested deep", "*1000\r\n*1000\r\n*1000\r\n*1000\r\n*1000\r\n*1000\r\n", "nested deeper"},
      {"negative string length", "$-5\r\n", "length -5"},
      {"negative array length", "*-7\r\n", "length -7"},
      {"length with garbage", "$12abc\r\n", "'12abc' is not a whole number"},
      {"length too long for a number", "*99999999999999999999999\r\n", "not a whole number"},
      {"unknown type", "%2\r\n", "type byte 0x25"},
      {"header without end", "$" + std::string(200, '1'), "header line longer"},
      {"status line without end", "+" + std::string(70000, 'x'), "header line longer than 65536"},
  };
}

// Replies arrive in pieces: each is built once all of it arrived, whatever
// the pieces.
TEST(RespReader, BuildsRepliesFromAnyPieces) {
  const std::string wire = "*2\r\n$1\r\n0\r\n*3\r\n$3\r\nabc\r\n$-1\r\n:42\r\n+OK\r\n-ERR no\r\n*-1\r\n$0\r\n\r\n";
  for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{7}, wire.size()}) {
    SCOPED_TRACE(piece);
    remote::RespReader r;
    std::vector<std::unique_ptr<remote::Reply::Node>> got;
    for (std::size_t at = 0; at < wire.size(); at += piece) {
      r.feed(wire.data() + at, std::min(piece, wire.size() - at));
      while (auto n = r.next()) got.push_back(std::move(n));
    }
    ASSERT_EQ(got.size(), 5u);
    EXPECT_EQ(r.buffered(), 0u);
    ASSERT_EQ(got[0]->type, remote::Reply::Type::array);
    ASSERT_EQ(got[0]->elements.size(), 2u);
    EXPECT_EQ(got[0]->elements[0]->str, "0");
    const auto& page = *got[0]->elements[1];
    ASSERT_EQ(page.elements.size(), 3u);
    EXPECT_EQ(page.elements[0]->str, "abc");
    EXPECT_EQ(page.elements[1]->type, remote::Reply::Type::nil);
    EXPECT_EQ(page.elements[2]->integer, 42);
    EXPECT_EQ(got[1]->type, remote::Reply::Type::status);
    EXPECT_EQ(got[1]->str, "OK");
    EXPECT_EQ(got[2]->type, remote::Reply::Type::error);
    EXPECT_EQ(got[2]->str, "ERR no");
    EXPECT_EQ(got[3]->type, remote::Reply::Type::nil);
    EXPECT_EQ(got[4]->type, remote::Reply::Type::string);
    EXPECT_EQ(got[4]->str, "");
  }
}

TEST_F(RemoteWireTest, HostileRepliesAreFailedOperationsThroughTheTier) {
  const long before = peak_rss_kib();
  for (const Hostile& h : hostile_answers()) {
    SCOPED_TRACE(h.name);
    FakeServer server(h.answer);
    const std::string d = (base / h.name).string();
    std::filesystem::create_directories(d);
    storage::RemoteTier tier(remote::make_backend(remote::parse_url(server.url())));
    // The connection level: the failure names the announced size, at once.
    remote::Answer<std::string> got = tier.backend().get(format::remote_key::object(std::string(64, 'a')));
    ASSERT_TRUE(got.is_failure());
    EXPECT_EQ(got.fault().kind, h.kind) << got.fault().detail;
    EXPECT_TRUE(has(got.fault().detail, h.detail)) << got.fault().detail;
    // The tier: a miss, counted as a failed operation: once when the remote
    // is judged down (the later calls are skipped), at each call when only
    // a value was too large (each call opens a connection again).
    const bool down = h.kind == remote::Failure::dropped;
    storage::RemoteTier counted(remote::make_backend(remote::parse_url(server.url())));
    EXPECT_FALSE(counted.object(std::string(64, 'b'), d).has_value());
    EXPECT_FALSE(counted.object(std::string(64, 'c'), d).has_value());
    EXPECT_TRUE(counted.tuning(d).empty());
    storage::flush_stats();
    const auto s = storage::read_stats(d);
    const std::string kind(remote::failure_name(h.kind));
    EXPECT_EQ(s.remote.errors.count(kind) ? s.remote.errors.at(kind) : 0u, down ? 1u : 3u);
    EXPECT_EQ(server.connections(), down ? 2 : 4);
  }
  // Nothing announced was allocated: the peak grew by far less than one
  // announced array of 2^31 elements (16 GiB) or string (2 GiB).
  EXPECT_LT(peak_rss_kib() - before, 64 * 1024);
}

// A server that answers every SCAN with a cursor that never ends the walk:
// the listing (a job's tuning read, a pull's) ends within a few timeouts,
// a failure, never a hang.
TEST_F(RemoteWireTest, AListingThatNeverEndsIsAFailure) {
  FakeServer server("*2\r\n$1\r\n1\r\n*0\r\n");
  std::string url = server.url();
  url.replace(url.find("?timeout=3s"), 11, "?timeout=250ms&list-timeout=1s");
  auto backend = remote::make_backend(remote::parse_url(url));
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> done{false};
  remote::Answer<std::vector<std::string>> got = remote::Answer<std::vector<std::string>>::miss();
  std::thread lister([&] {
    got = backend->list("npucache:");
    done = true;
  });
  for (int i = 0; i < 600 && !done; ++i) ::usleep(50000);  // 30 s at most
  ASSERT_TRUE(done) << "the listing never ended";
  lister.join();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(got.is_failure());
  EXPECT_EQ(got.fault().kind, remote::Failure::timeout) << got.fault().detail;
  EXPECT_TRUE(has(got.fault().detail, "did not end within")) << got.fault().detail;
  EXPECT_LT(took, 10.0);  // list-timeout 1 s (4 timeouts are 1 s too), and the last round trip
}

TEST_F(RemoteWireTest, HostileRepliesNeverFailACompile) {
  for (const Hostile& h : {hostile_answers()[0], hostile_answers()[3], hostile_answers()[5]}) {
    SCOPED_TRACE(h.name);
    FakeServer server(h.answer);
    const std::string d = (base / (std::string("job ") + h.name)).string();
    Hooked m;
    CacheOptions o = hooked_options(d, "f");
    o.remote.url = server.url();
    testing::internal::CaptureStderr();
    std::vector<float> got;
    Outcome outcome{};
    {
      auto fn = cache_compile(m, &Hooked::f, o);
      got = fn(hooked_input()).to_vector();
      outcome = fn.status().outcome;
    }
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(close_to(got, Hooked().f(hooked_input()).to_vector()));
    EXPECT_EQ(outcome, Outcome::compiled) << log;
    EXPECT_TRUE(has(log, h.detail)) << log;  // warned, naming the cause
    storage::flush_stats();
    const auto s = storage::read_stats(d);
    EXPECT_EQ(s.remote.errors.count("dropped") ? s.remote.errors.at("dropped") : 0u, 1u);
    EXPECT_EQ(s.saves, 1u);  // the local cache took the compile
  }
}

// Bundles and pulls carry the decisions that are not programs. A server
// sees batch 1, 4 and 8 with automatic dynamic: its first run compiles the
// static and the dynamic version and keeps the dim it made dynamic; a
// cache filled from it by an import or a pull compiles nothing.
class StartWarm : public testing_support::TempDirTest {
 protected:
  StartWarm() : TempDirTest("startwarm") {}
  std::string at(const std::string& name) const { return (base / name).string(); }
  static testing_support::Out run(const std::string& command) {
    testing_support::Out o = testing_support::sh(command);
    EXPECT_EQ(o.status, 0) << command << "\n" << o.text;
    return o;
  }
  testing_support::Out serve(const std::string& d) const {
    return run("env -u NPUCACHE_REMOTE " + std::string(SERVE_WORKER) + " " + d + " --dynamic auto --batches 1,4,8");
  }
  static std::string cli(const std::string& args) { return std::string(NPUCACHE_CLI) + " " + args; }
  static int number(const std::string& text, const std::string& key) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(key + " ([0-9]+)"))) return -1;
    return std::stoi(m[1]);
  }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static std::vector<compiler::TuningRecord> tuning_of(const std::string& d) {
    return format::decode_tuning(slurp(d + "/" + format::names::kTuningFile), d);
  }
  // The source cache: compiled twice, with a profile and a tuning table.
  void warm_source() {
    testing_support::Out cold = serve(at("a"));
    ASSERT_EQ(number(cold.text, "compiles"), 2) << cold.text;
    ASSERT_TRUE(std::filesystem::exists(at("a") + "/" + format::names::kProfileFile));
    ASSERT_FALSE(tuning_of(at("a")).empty());
  }
  // `d`, filled from the source, starts warm.
  void expect_warm(const std::string& d) {
    EXPECT_TRUE(std::filesystem::exists(d + "/" + format::names::kProfileFile));
    EXPECT_EQ(tuning_of(d), tuning_of(at("a")));
    testing_support::Out warm = serve(d);
    EXPECT_EQ(number(warm.text, "compiles"), 0) << warm.text;
  }
};

TEST_F(StartWarm, ImportedBundleCompilesNothing) {
  warm_source();
  const std::string bundle = at("bundle.npuc");
  testing_support::Out e = run(cli("export " + at("a") + " -o " + bundle));
  EXPECT_TRUE(has(e.text, "1 dynamic-shape dims")) << e.text;
  testing_support::Out i = run(cli("import " + bundle + " " + at("b")));
  EXPECT_TRUE(has(i.text, "1 new dynamic-shape dims")) << i.text;
  expect_warm(at("b"));
}

TEST_F(StartWarm, PulledCacheCompilesNothing) {
  warm_source();
  testing_support::RedisServer server;
  run(cli("remote push " + at("a") + " --remote " + server.url()));
  // Damaged records beside them: reported (counted) and skipped.
  std::string model_info;
  for (const auto& f : std::filesystem::directory_iterator(at("a")))
    if (f.path().extension() == ".h5" && f.path().stem().string().starts_with("Server_"))
      model_info = f.path().stem().string();
  ASSERT_FALSE(model_info.empty());
  {
    storage::RemoteTier tier(remote::make_backend(remote::parse_url(server.url())));
    tier.push_blobs(format::BlobKind::profile, {{model_info + "|forward|arg0|999", ""}}, remote::Overwrite::no, "");
    tier.push_blobs(format::BlobKind::tuning, {{"simnpu\nmatmul", "not a decision"}}, remote::Overwrite::no, "");
  }
  testing_support::Out p = run(cli("remote pull Server --remote " + server.url() + " " + at("b")));
  EXPECT_TRUE(has(p.text, "1 new dynamic-shape dims")) << p.text;
  EXPECT_TRUE(has(p.text, "holds a damaged value")) << p.text;  // warned once per kind; each counted
  expect_warm(at("b"));
  storage::flush_stats();
  const auto stats = storage::read_stats(at("b"));
  EXPECT_EQ(stats.remote.errors.count("corrupt") ? stats.remote.errors.at("corrupt") : 0u, 2u);
}

// The bundle's side tables: carried exactly, validated as their files'
// records (a malformed one rejects the bundle), version 5 bundles (without
// them) still read, a later version refused.
TEST(BundleSideTables, CarriedValidatedAndVersioned) {
  format::Bundle b;
  b.tuning = {{"simnpu-v1 runtime 1.0.0", "matmul f32[8, 64] f32[64, 64]", {"tile_m=32", 1.5, 2.5, 8, ""}}};
  b.profiles = {{"Server_auto_0123456789abcdef", "forward", {"arg0", 0}}};
  const format::Bundle back = format::read_bundle(format::write_bundle(b));
  EXPECT_EQ(back.tuning, b.tuning);
  EXPECT_EQ(back.profiles, b.profiles);
  format::Bundle bad = b;
  bad.profiles[0].dim.dim = 999;
  try {
    (void)format::read_bundle(format::write_bundle(bad));
    ADD_FAILURE() << "a malformed dim was read";
  } catch (const CacheError& e) {
    EXPECT_TRUE(has(e.what(), "dim 999")) << e.what();
  }
  // The same records framed as another version (the header's checks hold).
  const auto framed = [](std::string_view records, uint32_t version) {
    const std::string payload = zstd::compress(records, 1);
    std::string out = "NPUCBNDL";
    const auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(version);
    put(uint64_t{payload.size()});
    put(uint64_t{records.size()});
    put(uint64_t{XXH3_64bits(payload.data(), payload.size())});
    return out + payload;
  };
  const std::string v6 = format::write_bundle({});
  // Version 6 without variant keys (builds reading 5 to 6 import it); 7
  // only when a template's key names its variant.
  const auto version_of = [](const std::string& bundle) {
    uint32_t v = 0;
    std::memcpy(&v, bundle.data() + 8, sizeof v);
    return v;
  };
  EXPECT_EQ(version_of(v6), 6u);
  format::Bundle legacy, variant;
  legacy.templates = {{std::string(32, 'a'), "t"}};
  variant.templates = {{std::string(32, 'a') + "." + std::string(16, 'b'), "t"}};
  EXPECT_EQ(version_of(format::write_bundle(legacy)), 6u);
  EXPECT_EQ(version_of(format::write_bundle(variant)), 7u);
  const std::string records = zstd::decompress(std::string_view(v6).substr(36), std::size_t{1} << 20);
  ASSERT_EQ(records.substr(records.size() - 8), std::string(8, '\0'));  // no decisions, no dims
  const format::Bundle v5 = format::read_bundle(framed(records.substr(0, records.size() - 8), 5));
  EXPECT_TRUE(v5.tuning.empty() && v5.profiles.empty() && v5.entries.empty());
  // Version 8 names the objects whose regions nothing vouches for: each
  // one of the bundle's objects, at least one.
  try {
    (void)format::read_bundle(framed(records + std::string(4, '\0'), 8));
    ADD_FAILURE() << "a version 8 bundle naming no object was read";
  } catch (const CacheError& e) {
    EXPECT_TRUE(has(e.what(), "0 unvouched objects of 0")) << e.what();
  }
  try {
    (void)format::read_bundle(framed(records, 9));
    ADD_FAILURE() << "a later version was read";
  } catch (const CacheError& e) {
    EXPECT_TRUE(has(e.what(), "written by a later version")) << e.what();
  }
}

}  // namespace
