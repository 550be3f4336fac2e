// The remote tier against a real redis-server (started here on a free
// loopback port), measured side by side in one run:
//  1. time-to-ready of tiny-llama prompt + decode through cache_compile, a
//     new process per start: an empty local cache with a warm remote vs
//     the same job warm from its local cache (goal <= 1.3x; the local
//     commit of what the remote served runs off the path to ready), and vs
//     a cold compile;
//     and the same warm remote start with signed publishing (values signed
//     by the writer, verified by a reader with trusted keys), side by side,
//     with the signature checks' share of it (goal <= 3%): the objects of
//     the signed remote (what a warm start reads and verifies) verified in
//     this process, against the signed start's median;
//  2. fetch throughput: objects read through the tier (one get by graph
//     key, every check: header, record, graph key, size, checksums)
//     vs raw hiredis GETs of the same values (goal >= 80%), for the real
//     artifacts of the large model and for larger objects;
//  3. what the mix-up check (cache/own_key.h: the graph key of each
//     artifact's own trace, once per method and start) costs as a share of
//     the warm-remote start, measured on the job's stored artifacts.
//
//   bench_remote [trials] [fetch]    (runs itself as the child processes;
//                                    `fetch`: only the fetch throughput)
#include <npucache/cache.h>
#include <npucache/models/models.h>

#include "cache/own_key.h"
#include "cache/runnable.h"
#include "format/remote_value.h"
#include "harness.h"
#include "remote/backend.h"
#include "remote/config.h"
#include "remote/signing.h"
#include "storage/remote_tier.h"
#include "storage/store.h"
#include "support/redis_server.h"

#include <hiredis/hiredis.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

using namespace npucache;
namespace signing = npucache::remote::signing;
namespace fs = std::filesystem;

namespace {

int child(const std::string& dir, const std::string& url, const std::string& size) {
  models::TinyLlama m(size == "large" ? models::TinyLlamaConfig::large() : models::TinyLlamaConfig{}, {});
  CacheOptions o;
  o.cache_dir = dir;
  o.ge_cache = true;
  o.remote.url = url;
  std::vector<int64_t> toks{1, 2, 3, 4, 5, 6, 7, 8}, pos{0, 1, 2, 3, 4, 5, 6, 7};
  const Tensor t8 = Tensor::from_vector_i64(toks, {1, 8}), p8 = Tensor::from_vector_i64(pos, {1, 8});
  const Tensor t1 = Tensor::from_vector_i64({9}, {1, 1}), p1 = Tensor::from_vector_i64({8}, {1, 1});
  const double built = perf::now_s();
  auto prompt = cache_compile(m, &models::TinyLlama::prompt, o);
  auto decode = cache_compile(m, &models::TinyLlama::decode, o);
  auto kv = m.make_kv_cache(1);
  prompt(t8, p8, kv);
  decode(t1, p1, kv).to_vector();
  const double ready = perf::now_s() - built;
  const auto remote = [](const CallStatus& st) { return st.reason.find("remote") != std::string::npos; };
  const bool from_remote = remote(prompt.status()) && remote(decode.status());
  std::printf("%.6f %d %s %s\n", ready, from_remote ? 1 : 0, std::string(outcome_name(prompt.status().outcome)).c_str(),
              std::string(outcome_name(decode.status().outcome)).c_str());
  std::fflush(stdout);
  return 0;  // the background commit finishes as the process exits, after `ready`
}

struct Start {
  double ready = 0;
  bool from_remote = false;
  std::string outcomes;
};

using Env = std::vector<std::pair<std::string, std::string>>;

Start spawn(const char* self, const std::string& dir, const std::string& url, const std::string& size,
            const Env& env = {}) {
  int fds[2];
  if (::pipe(fds) != 0) std::exit(1);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::setenv("NPUCACHE_LOG_LEVEL", "warn", 1);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execl(self, self, "child", dir.c_str(), url.c_str(), size.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[256] = {0};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  Start s;
  int remote = 0;
  char a[32] = {0}, b[32] = {0};
  if (n <= 0 || std::sscanf(buf, "%lf %d %31s %31s", &s.ready, &remote, a, b) != 4) {
    std::fprintf(stderr, "child failed\n");
    std::exit(1);
  }
  s.from_remote = remote == 1;
  s.outcomes = std::string(a) + "+" + b;
  return s;
}

// Seconds to verify every signed object of the remote at `url` once (decode
// the record, the trusted key, the Ed25519 signature, the value's hash):
// what a warm start verifies, as it reads each object by its graph key and
// nothing else; the median of `trials` rounds; `values` counts them.
double verify_all(const std::string& url, const signing::PublicKey& trusted, int trials, std::size_t* values) {
  auto b = remote::make_backend(remote::parse_url(url));
  const auto listed = b->list("");
  if (!listed.is_hit()) std::exit(1);
  std::vector<std::string> keys;
  for (const auto& k : listed.value())  // the objects: what a warm start reads (by graph key)
    if (k.find(":obj:") != std::string::npos && !k.ends_with(signing::kSuffix)) {
      keys.push_back(k);
      keys.push_back(k + std::string(signing::kSuffix));
    }
  auto got = b->get_many(keys);
  *values = keys.size() / 2;
  std::vector<double> t;
  for (int r = 0; r < trials; ++r) {
    const double t0 = perf::now_s();
    for (std::size_t i = 0; i < keys.size(); i += 2) {
      std::string why;
      const auto rec = signing::decode(got[i + 1].value(), &why);
      if (!rec || !(rec->signer == trusted) || !signing::verify(*rec, keys[i]) ||
          signing::hash(got[i].value()) != rec->value_hash)
        std::exit(1);
    }
    t.push_back(perf::now_s() - t0);
  }
  return perf::median(t);
}

// Raw hiredis: GET each key, as a client with no checks would.
double raw_gets(int port, const std::vector<std::string>& keys, std::size_t* bytes) {
  redisContext* c = redisConnect("127.0.0.1", port);
  const double t0 = perf::now_s();
  *bytes = 0;
  for (const auto& k : keys) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", k.data(), k.size()));
    if (!r || r->type != REDIS_REPLY_STRING) std::exit(1);
    *bytes += r->len;
    freeReplyObject(r);
  }
  const double t = perf::now_s() - t0;
  redisFree(c);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "child") return child(argv[2], argv[3], argv[4]);
  const int trials = argc > 1 ? std::atoi(argv[1]) : 5;
  const bool fetch_only = argc > 2 && std::string(argv[2]) == "fetch";
  const fs::path work = fs::temp_directory_path() / ("npucache-bench-remote-" + std::to_string(::getpid()));
  fs::create_directories(work);
  // Started on a free loopback port and waited for (it answers PING);
  // killed when main returns.
  testing_support::RedisServer server;
  const int port = server.port();
  const std::string url = server.url();
  std::printf("remote tier: redis-server on 127.0.0.1 (loopback), median of %d alternated trials\n", trials);
  int rc = 0;
  // Signed publishing: a writer's key and a reader trusting it.
  const signing::PublicKey signer_key = signing::write_key_files((work / "keys").string());
  const Env signer{{"NPUCACHE_REMOTE_SIGNING_KEY", (work / "keys" / "signing.key").string()}};
  const Env reader{{"NPUCACHE_REMOTE_TRUSTED_KEYS", (work / "keys" / "signing.pub").string()}};
  int db = 0;
  if (fetch_only) spawn(argv[0], (work / "cold").string(), "off", "large");  // the real artifacts
  for (const char* size : {"small", "large"}) {
    if (fetch_only) break;
    // Warm the remote once (a cold job with the remote writes back), and a
    // signed one in a database of its own.
    spawn(argv[0], (work / "seed").string(), url, size);
    fs::remove_all(work / "seed");
    const std::string signed_url = server.url("db=" + std::to_string(++db));
    spawn(argv[0], (work / "seed").string(), signed_url, size, signer);
    fs::remove_all(work / "seed");
    std::vector<double> cold, local, remote, signed_remote;
    double checks = 0;  // the mix-up checks of one start (median of repeats, summed over the methods)
    bool all_remote = true;
    for (int t = 0; t < trials; ++t) {
      const std::string c = (work / "cold").string(), r = (work / "remote").string();
      fs::remove_all(c);
      fs::remove_all(r);
      cold.push_back(spawn(argv[0], c, "off", size).ready);   // cold compile, no remote
      local.push_back(spawn(argv[0], c, "off", size).ready);  // warm from the local cache
      const Start s = spawn(argv[0], r, url, size);           // empty local cache, warm remote
      remote.push_back(s.ready);
      all_remote = all_remote && s.from_remote;
      fs::remove_all(r);
      const Start v = spawn(argv[0], r, signed_url, size, reader);  // the same, signed and verified
      signed_remote.push_back(v.ready);
      all_remote = all_remote && v.from_remote;
    }
    const double mc = perf::median(cold), ml = perf::median(local), mr = perf::median(remote);
    std::printf("\n%s model, max-autotune + ge_cache, prompt + decode\n", size);
    std::printf("  cold compile (empty cache, no remote)          %9.2f ms\n", mc * 1e3);
    std::printf("  warm from the local cache                      %9.2f ms\n", ml * 1e3);
    std::printf("  empty local cache, warm remote                 %9.2f ms   remote/local %5.2fx  (goal <= 1.3x)%s\n",
                mr * 1e3, mr / ml, all_remote ? "" : "  NOT SERVED BY THE REMOTE");
    std::printf("  cold / warm-remote                             %9.1fx\n", mc / mr);
    {  // 3. the mix-up check of each method the start serves
      const storage::Store store = storage::Store::open((work / "cold").string(), storage::Create::no);
      for (const auto& m : store.model_infos())
        if (const auto idx = store.index(m))
          for (const auto& e : idx->index.entries) {
            const cache::Decoded d = cache::decode(store.object(e.graph_key, false), e.parameters);
            const cache::KeyInputs in = cache::key_inputs_of(e, *d.graph);
            std::vector<double> t;
            for (int r = 0; r < 21; ++r) {
              const double t0 = perf::now_s();
              cache::check_own_key(*d.graph, e.graph_key, in);
              t.push_back(perf::now_s() - t0);
            }
            checks += perf::median(t);
          }
    }
    std::printf("  mix-up checks (own trace -> graph key)         %9.3f ms   of the warm-remote start %5.2f %%\n",
                checks * 1e3, 100.0 * checks / mr);
    const double ms = perf::median(signed_remote);
    std::size_t values = 0;
    const double verify = verify_all(signed_url, signer_key, 20, &values);
    std::printf("  empty local cache, warm signed remote          %9.2f ms   signed/unsigned %5.2fx\n", ms * 1e3,
                ms / mr);
    std::printf(
        "  signature checks of its %3zu signed objects     %9.3f ms   share of the signed start %5.2f %%  "
        "(goal <= 3%%)\n",
        values, verify * 1e3, 100.0 * verify / ms);
    std::printf(
        "  signature and mix-up checks                    %9.3f ms   share of the signed start %5.2f %%  "
        "(goal <= 3%%)\n",
        (checks + verify) * 1e3, 100.0 * (checks + verify) / ms);
    if (!all_remote) rc = 1;
  }
  // Throughput: the large model's real artifacts, then larger objects.
  {
    const storage::Store store = storage::Store::open((work / "cold").string(), storage::Create::no);
    std::vector<storage::ObjectRecord> real;
    for (const auto& k : store.object_keys()) real.push_back(store.object(k, true));
    std::mt19937_64 random(7);
    const auto synthetic = [&](std::size_t bytes, int count) {
      std::vector<storage::ObjectRecord> v;
      for (int i = 0; i < count; ++i) {
        storage::ObjectRecord o;
        char key[40];
        std::snprintf(key, sizeof key, "%016llx%016llx", static_cast<unsigned long long>(random()),
                      static_cast<unsigned long long>(random()));
        o.graph_key = key;
        o.raw.resize(bytes);
        for (std::size_t j = 0; j < bytes; j += 8) {
          const uint64_t x = random() & 0x0f0f0f0f0f0f0f0full;  // compressible about 2x, as artifacts
          std::memcpy(o.raw.data() + j, &x, std::min<std::size_t>(8, bytes - j));
        }
        o.meta.raw_size = bytes;
        o.meta.checksum = storage::checksum(o.raw);
        v.push_back(std::move(o));
      }
      return v;
    };
    struct Set {
      std::string label;
      std::vector<storage::ObjectRecord> objects;
      int repeat;
    };
    std::vector<Set> sets;
    sets.push_back({"the large model's artifacts", real, 200});
    sets.push_back({"256 KiB objects", synthetic(256 << 10, 64), 4});
    sets.push_back({"4 MiB objects", synthetic(4 << 20, 16), 2});
    std::printf("\nfetch throughput: through the tier (one get, every check) vs raw hiredis GETs\n");
    storage::RemoteTier tier(remote::make_backend(remote::parse_url(url + "?timeout=30")));
    for (const auto& s : sets) {
      tier.push(s.objects, {}, "");
      std::vector<std::string> keys;
      std::size_t value_bytes = 0;
      for (const auto& o : s.objects)
        for (int r = 0; r < s.repeat; ++r) keys.push_back(storage::remote_key::object(o.graph_key));
      std::size_t raw_bytes = 0;
      const auto times = perf::interleaved({[&] { return raw_gets(port, keys, &raw_bytes); },
                                            [&] {
                                              const double t0 = perf::now_s();
                                              value_bytes = 0;
                                              for (int r = 0; r < s.repeat; ++r)
                                                for (const auto& o : s.objects) {
                                                  auto got = tier.object(o.graph_key, "");
                                                  if (!got) std::exit(1);
                                                  value_bytes += got->value_bytes;
                                                }
                                              return perf::now_s() - t0;
                                            }},
                                           trials);
      const double raw_gbps = static_cast<double>(raw_bytes) / times[0] / 1e9;
      const double tier_gbps = static_cast<double>(value_bytes) / times[1] / 1e9;
      std::printf(
          "  %-28s %5zu values of %8.1f KiB: raw %6.3f GB/s, tier %6.3f GB/s   tier/raw %5.1f %%  (goal >= 80%%)\n",
          s.label.c_str(), keys.size(), static_cast<double>(raw_bytes) / static_cast<double>(keys.size()) / 1024.0,
          raw_gbps, tier_gbps, 100.0 * tier_gbps / raw_gbps);
    }
  }
  fs::remove_all(work);
  return rc;
}
