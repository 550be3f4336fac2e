// The remote seam (remote/backend.h) and the tier over it, against every
// backend: a real redis-server (tests/support/redis_server.h) and a shared
// directory (file://). Each backend keeps the seam's contract (a miss, a
// hit, Overwrite::no keeps the first writer's value under concurrent
// writers, listing by prefix, removal); the tier's behaviour is the same
// over each: a warm fetch is one backend call (a counting backend around
// the real one), damaged values are refused and removed, an entry naming
// another write of its object is a miss, values in the previous key layout
// are never read, and a cache warmed through the remote serves an empty
// one without compiling (cache_worker, as users run jobs).
#include <npucache/error.h>

#include "format/keys.h"
#include "format/names.h"
#include "format/remote_value.h"
#include "remote/backend.h"
#include "remote/config.h"
#include "storage/remote_tier.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace npucache;
namespace fs = std::filesystem;
using testing_support::has;
using testing_support::Out;
using testing_support::RedisServer;
using testing_support::sh;

namespace {

enum class Kind { redis, file };

// A backend around another that counts the calls the tier makes.
class Counting final : public remote::Backend {
 public:
  explicit Counting(std::unique_ptr<remote::Backend> inner) : Backend(inner->config()), inner_(std::move(inner)) {}
  remote::Answer<std::string> get(const std::string& key) override {
    ++calls["get"];
    return inner_->get(key);
  }
  std::vector<remote::Answer<std::string>> get_many(const std::vector<std::string>& keys) override {
    ++calls["get_many"];
    return inner_->get_many(keys);
  }
  remote::Answer<bool> put(const std::string& key, std::string_view value, remote::Overwrite o) override {
    ++calls["put"];
    return inner_->put(key, value, o);
  }
  remote::Answer<std::size_t> remove(const std::vector<std::string>& keys) override {
    ++calls["remove"];
    return inner_->remove(keys);
  }
  remote::Answer<std::vector<std::string>> list(const std::string& prefix) override {
    ++calls["list"];
    return inner_->list(prefix);
  }
  int total() const {
    int n = 0;
    for (const auto& [k, v] : calls) n += v;
    return n;
  }
  std::map<std::string, int> calls;

 private:
  std::unique_ptr<remote::Backend> inner_;
};

storage::ObjectRecord object(const std::string& graph_key, const std::string& text) {
  storage::ObjectRecord o;
  o.graph_key = graph_key;
  for (int i = 0; i < 200; ++i) o.raw += text + std::to_string(i) + ";";
  o.meta.raw_size = o.raw.size();
  o.meta.checksum = storage::checksum(o.raw);
  return o;
}

const std::string kModelInfo = "Model_dynamic_0123456789abcdef";

storage::EntryRecord entry_of(const storage::ObjectRecord& o, const std::string& func) {
  using namespace storage::component;
  storage::EntryRecord e;
  e.path = kModelInfo + "/" + func;
  e.meta.name = "Model." + func + "(x)";
  e.meta.date = "2026-11-26 05:00:00.000002";
  e.meta.version = storage::names::kFormatVersion;
  e.meta.lookup_key = "fedcba9876543210";
  e.meta.model_info = kModelInfo;
  e.meta.components = {{kModelClass, "Model"},
                       {kParameterSignature, "0011223344556677"},
                       {kConfig, "8899aabbccddeeff"},
                       {kMode, "default"},
                       {kDynamic, "true"},
                       {kDecompositions, "default"},
                       {kConfigOptions, ""},
                       {kMethod, func},
                       {kRuntimeVersion, "simnpu-v1 runtime 1.0.0"},
                       {kFormatVersion, storage::names::kFormatVersion},
                       {kCodeVersion, "v1"}};
  e.meta.rank = {1, 0, 0, 0, "node0", 4242};
  e.parameters = {"linear.weight"};
  e.graph_key = o.graph_key;
  e.object_checksum = o.meta.checksum;
  return e;
}

const std::string kKeyA = "0123456789abcdef0123456789abcdef";
const std::string kKeyB = "fedcba9876543210fedcba9876543210";

class Backends : public testing_support::TempDirTest, public ::testing::WithParamInterface<Kind> {
 protected:
  Backends() : TempDirTest("backends") {}
  void SetUp() override {
    TempDirTest::SetUp();
    if (GetParam() == Kind::redis) {
      server_.emplace();
      url_ = server_->url("timeout=5");
    } else {
      fs::create_directories(base / "remote");
      url_ = "file://" + (base / "remote").string();
    }
  }
  void TearDown() override {
    server_.reset();
    TempDirTest::TearDown();
  }
  std::unique_ptr<remote::Backend> backend(const std::string& attrs = "") const {
    const std::string sep = url_.find('?') == std::string::npos ? "?" : "&";
    return remote::make_backend(remote::parse_url(attrs.empty() ? url_ : url_ + sep + attrs));
  }
  // A tier over a counting backend (`counting` points into it).
  storage::RemoteTier tier(Counting** counting) const {
    auto c = std::make_unique<Counting>(backend());
    *counting = c.get();
    return storage::RemoteTier(std::move(c));
  }
  std::string cache_dir(const std::string& name) const { return (base / name).string(); }
  Out worker(const std::string& d, const std::string& args = "prompt") const {
    return sh("NPUCACHE_REMOTE='" + url_ + "' " + CACHE_WORKER + " run " + d + " seed " + args);
  }

  std::string url_;
  std::optional<RedisServer> server_;
};

std::string name_of(const ::testing::TestParamInfo<Kind>& p) { return p.param == Kind::redis ? "Redis" : "File"; }

}  // namespace

TEST_P(Backends, FactoryChoosesByScheme) {
  EXPECT_EQ(backend()->config().scheme, GetParam() == Kind::redis ? remote::Scheme::redis : remote::Scheme::file);
}

TEST_P(Backends, KeysToBytes) {
  auto b = backend();
  const std::string p = "npucache-test:";
  EXPECT_TRUE(b->get(p + "a").is_miss());
  const std::string binary = std::string("v\0\n\xff", 4) + std::string(70000, 'x');
  ASSERT_TRUE(b->put(p + "a", binary, remote::Overwrite::yes).value());
  auto got = b->get(p + "a");
  ASSERT_TRUE(got.is_hit());
  EXPECT_EQ(got.value(), binary);
  // Overwrite::no keeps what is there; yes replaces it.
  auto kept = b->put(p + "a", "other", remote::Overwrite::no);
  ASSERT_TRUE(kept.is_hit());
  EXPECT_FALSE(kept.value());
  EXPECT_EQ(b->get(p + "a").value(), binary);
  EXPECT_TRUE(b->put(p + "a", "replaced", remote::Overwrite::yes).value());
  EXPECT_EQ(b->get(p + "a").value(), "replaced");
  // Keys with bytes a file name or a glob pattern would mean otherwise.
  const std::vector<std::string> odd = {p + "b/c", p + "b\nd", p + "b*", p + "b%41", p + "b..", p + "b[1]"};
  for (const auto& k : odd) ASSERT_TRUE(b->put(k, k, remote::Overwrite::no).value()) << k;
  ASSERT_TRUE(b->put("npucache-other:b", "x", remote::Overwrite::no).value());
  auto listed = b->list(p + "b");
  ASSERT_TRUE(listed.is_hit());
  EXPECT_EQ(std::set<std::string>(listed.value().begin(), listed.value().end()),
            std::set<std::string>(odd.begin(), odd.end()));
  EXPECT_TRUE(b->list(p + "z").value().empty());
  std::vector<std::string> keys = odd;
  keys.push_back(p + "none");
  auto many = b->get_many(keys);
  ASSERT_EQ(many.size(), keys.size());
  for (std::size_t i = 0; i < odd.size(); ++i) EXPECT_EQ(many[i].value(), odd[i]);
  EXPECT_TRUE(many.back().is_miss());
  // Keys longer than a file name may be (a file backend's name of 200
  // bytes is a file beside the directory of longer names it begins).
  const std::vector<std::string> longer = {p + "L" + std::string(600, 'y'), p + "L" + std::string(300, 'y') + "z",
                                           p + "L" + std::string(200 - p.size() - 1, 'y')};
  for (const auto& k : longer) ASSERT_TRUE(b->put(k, k.substr(k.size() - 3), remote::Overwrite::no).value());
  for (const auto& k : longer) EXPECT_EQ(b->get(k).value(), k.substr(k.size() - 3));
  auto listed_longer = b->list(p + "L" + std::string(250, 'y'));
  ASSERT_TRUE(listed_longer.is_hit());
  EXPECT_EQ(std::set<std::string>(listed_longer.value().begin(), listed_longer.value().end()),
            std::set<std::string>(longer.begin(), longer.begin() + 2));
  EXPECT_EQ(b->list(p + "L").value().size(), 3u);
  EXPECT_EQ(b->remove(longer).value(), 3u);
  auto removed = b->remove({p + "a", p + "b*", p + "none"});
  ASSERT_TRUE(removed.is_hit());
  EXPECT_EQ(removed.value(), 2u);
  EXPECT_TRUE(b->get(p + "b*").is_miss());
  EXPECT_TRUE(b->get(p + "b[1]").is_hit());
}

// Writers racing for one key with Overwrite::no: exactly one wins and
// every reader sees the winner's whole value, never a part.
TEST_P(Backends, OneWriterWinsARace) {
  constexpr int kWriters = 8;
  std::atomic<int> won{0};
  std::vector<std::string> values;
  for (int i = 0; i < kWriters; ++i) values.push_back(std::string(200000 + i, static_cast<char>('a' + i)));
  std::vector<std::thread> threads;
  std::atomic<int> winner{-1};
  for (int i = 0; i < kWriters; ++i)
    threads.emplace_back([&, i] {
      auto b = backend();  // a connection each, as separate hosts
      auto put = b->put("npucache-test:race", values[static_cast<std::size_t>(i)], remote::Overwrite::no);
      if (put.is_hit() && put.value()) {
        ++won;
        winner = i;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  ASSERT_GE(winner.load(), 0);
  EXPECT_EQ(backend()->get("npucache-test:race").value(), values[static_cast<std::size_t>(winner.load())]);
  if (GetParam() == Kind::file) {  // no temporary file is left behind
    for (const auto& f : fs::directory_iterator(base / "remote")) {
      EXPECT_FALSE(has(f.path().filename().string(), ".tmp")) << f.path();
    }
  }
}

// A warm fetch is one backend call: by graph key (a traced graph), and an
// entry then its object (the fast path) two, with no listing and no write.
TEST_P(Backends, WarmFetchIsOneCall) {
  Counting* writes = nullptr;
  storage::RemoteTier writer = tier(&writes);
  const storage::ObjectRecord o = object(kKeyA, "artifact");
  const storage::EntryRecord e = entry_of(o, "prompt");
  const auto pushed = writer.push({o}, {e}, "");
  ASSERT_EQ(pushed.objects, 1u);
  ASSERT_EQ(pushed.entries, 1u);
  EXPECT_EQ(writes->calls["put"], 2) << "one object and one entry";

  Counting* reads = nullptr;
  storage::RemoteTier reader = tier(&reads);
  auto got = reader.object(kKeyA, "");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->record.raw, o.raw);
  EXPECT_EQ(reads->total(), 1);
  EXPECT_EQ(reads->calls["get"], 1);

  reads->calls.clear();
  auto re = reader.entry(e.path, "");
  ASSERT_TRUE(re.has_value());
  // The writer wrote the object: the entry names its value's content hash.
  EXPECT_EQ(re->object_hash, storage::content_hash(storage::encode_remote_object(o)));
  ASSERT_TRUE(reader.object_by_hash(re->object_hash, re->entry.graph_key, "").has_value());
  EXPECT_EQ(reads->total(), 2);
  EXPECT_EQ(reads->calls["get"], 2);

  // A graph key nobody wrote: one call, a miss.
  reads->calls.clear();
  EXPECT_FALSE(reader.object(kKeyB, "").has_value());
  EXPECT_EQ(reads->total(), 1);
}

// The tier's reads over the backend: written once, every check kept.
TEST_P(Backends, TierChecksEverythingItReads) {
  Counting* calls = nullptr;
  storage::RemoteTier t = tier(&calls);
  const storage::ObjectRecord a = object(kKeyA, "first");
  ASSERT_EQ(t.push({a}, {entry_of(a, "prompt")}, "").objects, 1u);
  // Written once: another compile's object for the same graph key is not
  // stored; its entry names no hash then.
  const storage::ObjectRecord again = object(kKeyA, "second");
  const auto p = t.push({again}, {entry_of(again, "decode")}, "");
  EXPECT_EQ(p.objects, 0u);
  EXPECT_EQ(p.present, 1u);
  EXPECT_EQ(t.object(kKeyA, "")->record.raw, a.raw);
  auto decode = t.entry(kModelInfo + "/decode", "");
  ASSERT_TRUE(decode.has_value());
  EXPECT_TRUE(decode->object_hash.empty());
  // The listing: the model and both its entries.
  EXPECT_EQ(*t.models(""), std::vector<std::string>{kModelInfo});
  auto es = t.entries(kModelInfo, "");
  ASSERT_TRUE(es.has_value());
  EXPECT_EQ(es->size(), 2u);
  auto measured = t.measure({kKeyA, kKeyB}, "");
  ASSERT_TRUE(measured.has_value());
  EXPECT_EQ((*measured)[0].hash, storage::content_hash(storage::encode_remote_object(a)));
  EXPECT_GT((*measured)[0].value_bytes, a.raw.size());
  EXPECT_EQ((*measured)[1].value_bytes, 0u);
  // An entry naming another value of its object (written again since): a
  // miss, the object kept.
  EXPECT_FALSE(t.object_by_hash(std::string(32, 'e'), kKeyA, "").has_value());
  EXPECT_TRUE(t.backend().get(storage::remote_key::object(kKeyA)).is_hit());
  // The caller's check rejects it: a miss, kept.
  EXPECT_FALSE(
      t.object(kKeyA, "", [](const storage::ObjectRecord&) { throw TraceError("another signature"); }).has_value());
  EXPECT_TRUE(t.backend().get(storage::remote_key::object(kKeyA)).is_hit());
  // An object under another graph key's name, then a damaged value: refused
  // and removed, so a write-back replaces it.
  const std::string value = storage::encode_remote_object(a);
  ASSERT_TRUE(t.backend().put(storage::remote_key::object(kKeyB), value, remote::Overwrite::yes).value());
  EXPECT_FALSE(t.object(kKeyB, "").has_value());
  EXPECT_TRUE(t.backend().get(storage::remote_key::object(kKeyB)).is_miss());
  for (std::size_t at : {std::size_t{3}, std::size_t{44}, value.size() / 2, value.size() - 1}) {
    std::string bad = value;
    bad[at] ^= 0x01;
    ASSERT_TRUE(t.backend().put(storage::remote_key::object(kKeyA), bad, remote::Overwrite::yes).value());
    EXPECT_FALSE(t.object(kKeyA, "").has_value()) << at;
    EXPECT_TRUE(t.backend().get(storage::remote_key::object(kKeyA)).is_miss()) << at;
  }
  // Shared tables: records by name, a listing by a name's prefix.
  t.push_blobs(storage::BlobKind::profile, {{"M|prompt|x|0", ""}, {"M|decode|x|1", ""}, {"N|prompt|y|0", ""}},
               remote::Overwrite::no, "");
  EXPECT_EQ(t.blobs(storage::BlobKind::profile, "").size(), 3u);
  const auto prompt = t.blobs(storage::BlobKind::profile, "", "M|prompt|");
  ASSERT_EQ(prompt.size(), 1u);
  EXPECT_EQ(prompt[0].first, "M|prompt|x|0");
  t.push_blobs(storage::BlobKind::capture_template, {{"k\nwith newline", "bytes"}}, remote::Overwrite::no, "");
  EXPECT_EQ(t.blob(storage::BlobKind::capture_template, "k\nwith newline", "").value_or(""), "bytes");
  EXPECT_FALSE(t.blob(storage::BlobKind::capture_template, "absent", "").has_value());
}

// A remote written in the previous layout (format 6.0.0: objects by their
// content hash, graph references, index hashes) holds nothing this
// version reads: misses, never a misread.
TEST_P(Backends, PreviousLayoutIsReadAsMisses) {
  auto b = backend();
  const storage::ObjectRecord o = object(kKeyA, "old");
  const storage::EntryRecord e = entry_of(o, "prompt");
  const std::string value = storage::encode_remote_object(o);
  const std::string old = "npucache:6.0.0:";
  ASSERT_NE(storage::remote_key::prefix(), old);
  ASSERT_TRUE(b->put(old + "obj:" + storage::content_hash(value), value, remote::Overwrite::yes).value());
  ASSERT_TRUE(b->put(old + "graph:" + kKeyA, "old graph reference", remote::Overwrite::yes).value());
  ASSERT_TRUE(b->put(old + "index:" + kModelInfo, "old index", remote::Overwrite::yes).value());
  ASSERT_TRUE(b->put(old + "models", kModelInfo, remote::Overwrite::yes).value());
  storage::RemoteTier t(std::move(b));
  EXPECT_FALSE(t.object(kKeyA, "").has_value());
  EXPECT_FALSE(t.entry(e.path, "").has_value());
  EXPECT_TRUE(t.models("")->empty());
  EXPECT_TRUE(t.entries(kModelInfo, "")->empty());
  // A previous version's value planted under this version's keys is
  // refused by what it says, never served as something else.
  ASSERT_TRUE(
      t.backend().put(storage::remote_key::object(kKeyA), "old graph reference", remote::Overwrite::yes).value());
  EXPECT_FALSE(t.object(kKeyA, "").has_value());
}

// The values a remote of the previous formats holds (formats 10.0.0, 9.0.0, 8.0.0
// and 7.0.0: tests/fixtures/format-*/remote, the entry and object of the seed
// model's prompt) are never served: under their own keys they are not
// read (another namespace), and planted under this version's keys they
// name another entry path and graph key, or hold another encoding, and
// are refused; on the default hit check and on the code_version fast
// path, every job compiles and gets the eager result.
TEST_P(Backends, PreviousFormatValuesAreNeverServed) {
  struct Old {
    std::string version, entry, graph_key;
  };
  for (const Old& v : {Old{"10.0.0", "Model_dynamic_2dd6314f95dbbd47/prompt", "11456368c10c5d6b59d5ffd683b9a027"},
                       Old{"9.0.0", "Model_dynamic_f690432952dd28b4/prompt", "309e72f32314c9e497c638cd2a20789c"},
                       Old{"8.0.0", "Model_dynamic_61eb849d3703a6bf/prompt", "37f9c327871d07a92d775f1792c1352e"},
                       Old{"7.0.0", "Model_dynamic_4d10f22dad0ac79a/prompt", "ed332845d5901b5b9df5648bdf3151f2"}}) {
    SCOPED_TRACE("format " + v.version);
    const fs::path fixture = fs::path(FIXTURES) / ("format-" + v.version) / "remote";
    const auto read = [](const fs::path& p) {
      std::ifstream in(p, std::ios::binary);
      return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    };
    const std::string old_entry = read(fixture / "entry.bin");
    const std::string old_object = read(fixture / ("object-" + v.graph_key + ".bin"));
    ASSERT_FALSE(old_entry.empty() || old_object.empty());
    const std::string old = "npucache:" + v.version + ":";
    ASSERT_NE(storage::remote_key::prefix(), old);
    auto b = backend();
    ASSERT_TRUE(b->put(old + "entry:" + v.entry, old_entry, remote::Overwrite::yes).value());
    ASSERT_TRUE(b->put(old + "obj:" + v.graph_key, old_object, remote::Overwrite::yes).value());
    const auto current_keys = [&] {
      auto keys = b->list(storage::remote_key::prefix());
      EXPECT_TRUE(keys.is_hit());
      return keys.is_hit() ? keys.value() : std::vector<std::string>{};
    };
    const std::vector<std::string> cases = {"prompt --code-version v1", "prompt --code-version v1 --fast"};
    int n = 0;
    for (const std::string& args : cases) {
      if (const auto written = current_keys(); !written.empty()) {  // what an earlier case wrote back
        ASSERT_FALSE(b->remove(written).is_failure());
      }
      Out o = worker(cache_dir(v.version + "-" + std::to_string(n++)), args);
      ASSERT_EQ(o.status, 0) << args << ": " << o.text;
      EXPECT_TRUE(has(o.text, "compiled 1\nstatus compiled"))
          << args << ": a value of format " << v.version << " was served\n"
          << o.text;
      EXPECT_TRUE(has(o.text, "result 4 8 12")) << args << ": " << o.text;
    }
    // The jobs wrote this version's values back: plant the old ones over them.
    for (const std::string& args : cases) {
      int planted = 0;
      for (const auto& k : current_keys()) {
        if (has(k, ":obj:")) planted += b->put(k, old_object, remote::Overwrite::yes).value();
        if (has(k, ":entry:")) planted += b->put(k, old_entry, remote::Overwrite::yes).value();
      }
      ASSERT_GE(planted, 2) << args;
      Out o = worker(cache_dir(v.version + "-" + std::to_string(n++)), args);
      ASSERT_EQ(o.status, 0) << args << ": " << o.text;
      EXPECT_TRUE(has(o.text, "compiled 1\nstatus compiled"))
          << args << ": a value of format " << v.version << " under this version's key was served\n"
          << o.text;
      EXPECT_TRUE(has(o.text, "result 4 8 12")) << args << ": " << o.text;
    }
    EXPECT_EQ(b->get(old + "obj:" + v.graph_key).value(), old_object);  // the old keys are left as they were
    if (const auto written = current_keys(); !written.empty()) {
      ASSERT_FALSE(b->remove(written).is_failure());
    }
  }
}

// A cache warmed through the remote serves another host's empty cache
// without compiling (jobs as separate processes).
TEST_P(Backends, WarmRemoteServesAnEmptyCache) {
  Out cold = worker(cache_dir("a"));
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_TRUE(has(cold.text, "compiled 1")) << cold.text;
  Out fresh = worker(cache_dir("b"));
  ASSERT_EQ(fresh.status, 0) << fresh.text;
  EXPECT_TRUE(has(fresh.text, "compiled 0\nstatus hit")) << fresh.text;
  EXPECT_TRUE(has(fresh.text, "read from the remote cache")) << fresh.text;
  EXPECT_EQ(fresh.text.substr(fresh.text.find("result")), cold.text.substr(cold.text.find("result")));
  Out ls = sh(std::string(NPUCACHE_CLI) + " remote ls --json --remote '" + url_ + "'");
  ASSERT_EQ(ls.status, 0) << ls.text;
  const auto j = nlohmann::json::parse(ls.text.substr(ls.text.find('{')));
  EXPECT_EQ(j["entries"].get<int>(), 1) << ls.text;
  EXPECT_EQ(j["objects"].get<int>(), 1) << ls.text;
}

INSTANTIATE_TEST_SUITE_P(Remote, Backends, ::testing::Values(Kind::redis, Kind::file), name_of);

// What others plant in a shared remote directory is refused by the reading
// job and never blocks or exhausts it: a FIFO (an open or a read would
// wait for a writer forever), a symbolic link, a file larger than any
// value. Each is a failure of that value only: the next key is read.
TEST(FileBackend, PlantedFilesAreRefusedNeverWaitedOn) {
  testing_support::TempDir tmp("planted");
  const fs::path dir = tmp.path() / "remote";
  fs::create_directories(dir);
  auto b = remote::make_backend(remote::parse_url("file://" + dir.string() + "?max-object=1024"));
  ASSERT_TRUE(b->put("good", "value", remote::Overwrite::yes).is_hit());
  fs::path file;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) file = e.path();
  ASSERT_FALSE(file.empty());
  fs::copy_file(file, tmp.path() / "good.copy");
  const std::vector<std::pair<std::string, std::function<void()>>> plants = {
      {"a FIFO", [&] { ASSERT_EQ(::mkfifo(file.c_str(), 0644), 0); }},
      {"a symbolic link", [&] { fs::create_symlink(tmp.path() / "good.copy", file); }},
      {"a large sparse file",
       [&] {
         std::ofstream(file) << "";
         fs::resize_file(file, std::uintmax_t{1} << 34);
       }},
  };
  for (const auto& [what, plant] : plants) {
    fs::remove(file);
    plant();
    const auto got = b->get("good");
    ASSERT_TRUE(got.is_failure()) << what;
    EXPECT_FALSE(got.fault().repeated) << what;
    EXPECT_TRUE(has(got.fault().detail, file.string())) << what << ": " << got.fault().detail;
  }
  fs::remove(file);
  ASSERT_TRUE(b->put("other", "v2", remote::Overwrite::yes).is_hit());
  EXPECT_TRUE(b->get("other").is_hit());  // the remote goes on
}

// A file remote whose directory is missing is refused once, then skipped.
// An object under max-object whose value (with its record and graph text)
// is above what readers take is never written: it is skipped and counted,
// the other objects and entries are written, and no reader meets a value it
// refuses on every start.
TEST(FileBackend, AValueReadersWouldRefuseIsNeverWritten) {
  testing_support::TempDir tmp("toolarge");
  const fs::path dir = tmp.path() / "remote";
  fs::create_directories(dir);
  storage::RemoteTier t(remote::make_backend(remote::parse_url("file://" + dir.string() + "?max-object=1M")));
  storage::ObjectRecord big = object(kKeyA, "big");
  big.raw.assign(900 << 10, 'r');
  big.meta.raw_size = big.raw.size();
  big.meta.checksum = storage::checksum(big.raw);
  for (int i = 0; i < 12; ++i) big.graph_text.push_back(std::string(100 << 10, static_cast<char>('a' + i)));
  const storage::ObjectRecord small = object(kKeyB, "small");
  const auto pushed = t.push({big, small}, {entry_of(big, "prompt"), entry_of(small, "decode")}, "");
  EXPECT_EQ(pushed.objects, 1u);
  EXPECT_EQ(pushed.skipped, 2u) << "the object and the entry naming it";
  EXPECT_FALSE(pushed.failed) << "the push stopped at the object";
  const auto got = t.backend().get(format::remote_key::object(kKeyA));
  EXPECT_TRUE(got.is_miss()) << (got.is_failure() ? got.fault().detail : "a value was written");
  EXPECT_TRUE(t.object(kKeyB, "").has_value());
}

TEST(FileBackend, MissingDirectoryIsRefusedOnce) {
  auto b = remote::make_backend(remote::parse_url("file:///nonexistent/npucache-remote"));
  auto first = b->get("k");
  ASSERT_TRUE(first.is_failure());
  EXPECT_EQ(first.fault().kind, remote::Failure::refused);
  EXPECT_FALSE(first.fault().repeated);
  EXPECT_TRUE(has(first.fault().detail, "/nonexistent/npucache-remote")) << first.fault().detail;
  auto again = b->put("k", "v", remote::Overwrite::yes);
  ASSERT_TRUE(again.is_failure());
  EXPECT_TRUE(again.fault().repeated);
}
