// The settings (process/settings.h) as the library reads them: the
// environment over the user's npucache.conf over the default (the cache
// directory and the remote a serving program gets without any option);
// a cache's own npucache.conf over the user's for max_size, the
// config.json of earlier versions read and retired; a bad line named by
// file:line with what to do; a save that leaves the cache over its limit
// warns once per process, not once per save. A cache's own file is read as
// the cache's other files (no link, FIFO, file others may write: ignored,
// warned once), and every file is bounded.
#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/remote_options.h"
#include "log/log.h"
#include "process/context.h"
#include "process/settings.h"
#include "storage/gc.h"
#include "storage/store.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

void spit(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Sets (or unsets, with nullptr) a variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class Settings : public testing_support::TempDirTest {
 protected:
  Settings() : TempDirTest("settings") {}
  void SetUp() override {
    TempDirTest::SetUp();
    xdg_.emplace("XDG_CONFIG_HOME", (base / "config").c_str());
    for (const char* v : {"NPUCACHE_CACHE_DIR", "NPUCACHE_REMOTE", "NPUCACHE_MAX_SIZE", "NPUCACHE_LOG_FILE"})
      cleared_.emplace_back(std::make_unique<ScopedEnv>(v, nullptr));
  }
  void TearDown() override {
    cleared_.clear();
    xdg_.reset();
    TempDirTest::TearDown();
  }
  fs::path user_file() const { return base / "config" / "npucache" / "npucache.conf"; }

  // A cache of `n` entries with objects of 4 KiB each (as a job's commits).
  std::vector<std::string> fill(int n) const {
    const storage::Store store = storage::Store::open(dir.string(), storage::Create::yes);
    std::vector<std::string> paths;
    for (int i = 0; i < n; ++i) {
      storage::ObjectRecord o;
      o.raw.assign(4096, static_cast<char>('a' + i));
      o.meta.raw_size = o.raw.size();
      o.meta.checksum = storage::checksum(o.raw);
      o.graph_key = std::string(31, '0') + std::to_string(i);
      o.graph_text = {"graph " + o.graph_key};
      storage::EntryRecord e;
      e.path = "Worker_dynamic_0/e" + std::to_string(i);
      e.graph_key = o.graph_key;
      e.meta.name = e.path;
      e.meta.model_info = "Worker_dynamic_0";
      e.meta.components["runtime_version"] = "any";
      const storage::Writing held = store.writing();
      e.object_checksum = store.put_object(o, held).stored.meta.checksum;
      store.update_index("Worker_dynamic_0", {{"model_class", "Worker"}}, {e}, {}, held);
      paths.push_back(e.path);
    }
    return paths;
  }

 private:
  std::optional<ScopedEnv> xdg_;
  std::vector<std::unique_ptr<ScopedEnv>> cleared_;
};

// What the log says while `f` runs, in a process context of its own (its
// warnings said once afresh).
std::string log_of(const std::function<void()>& f) {
  std::ostringstream said;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(said);
  log::get().sinks().push_back(sink);
  {
    const process::Context::Scope scope;
    f();
  }
  log::get().sinks().pop_back();
  return said.str();
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST_F(Settings, TheEnvironmentOverridesTheUserFileWhichOverridesTheDefault) {
  const fs::path cwd = fs::current_path();
  EXPECT_EQ(default_cache_dir(), (cwd / ".npucache").string());
  EXPECT_EQ(process::setting("cache_dir").source, "default");
  spit(user_file(), "# mine\n\ncache_dir = " + (base / "from-file").string() + "\nremote = file:///shared\n");
  EXPECT_EQ(default_cache_dir(), (base / "from-file").string()) << "the library honours the user's file";
  EXPECT_EQ(process::setting("cache_dir").source, user_file().string() + ":3");
  EXPECT_EQ(process::setting("remote").value, "file:///shared");
  const remote::Config r = cache::resolve_remote({});
  EXPECT_TRUE(r.enabled()) << "a cached method without a remote option uses the user's file's";
  EXPECT_EQ(r.url, "file:///shared");
  {
    const ScopedEnv env("NPUCACHE_CACHE_DIR", (base / "from-env").c_str());
    EXPECT_EQ(default_cache_dir(), (base / "from-env").string());
    EXPECT_EQ(process::setting("cache_dir").source, "environment NPUCACHE_CACHE_DIR");
  }
  {
    const ScopedEnv home("XDG_CONFIG_HOME", nullptr);
    const ScopedEnv h("HOME", (base / "home").c_str());
    spit(base / "home" / ".config" / "npucache" / "npucache.conf", "cache_dir = ~/c\n");
    EXPECT_EQ(default_cache_dir(), (base / "home" / "c").string()) << "~/.config without XDG_CONFIG_HOME";
  }
}

TEST_F(Settings, ACachesOwnFileSetsItsLimitOverTheUserFile) {
  fill(1);
  EXPECT_EQ(storage::max_size(dir.string()), std::nullopt);
  spit(user_file(), "max_size = 2G\n");
  std::string source;
  EXPECT_EQ(storage::max_size(dir.string(), &source), std::size_t{2} << 30);
  EXPECT_EQ(source, user_file().string() + ":1");
  // The cache's own file, and the old config.json it replaces.
  spit(dir / "config.json", "{\"max_size\": 1048576}\n");
  EXPECT_EQ(storage::max_size(dir.string(), &source), std::size_t{1} << 20) << "config.json is still read";
  spit(dir / "npucache.conf", "# keep me\nmax_size = 64M\n");
  EXPECT_EQ(storage::max_size(dir.string(), &source), std::size_t{64} << 20);
  EXPECT_EQ(source, (dir / "npucache.conf").string() + ":2");
  storage::set_max_size(dir.string(), std::size_t{3} << 30);
  EXPECT_EQ(slurp(dir / "npucache.conf"), "# keep me\nmax_size = 3G\n") << "comments kept, one line changed";
  EXPECT_FALSE(fs::exists(dir / "config.json")) << "config.json is retired when the limit is set";
  storage::set_max_size(dir.string(), std::nullopt);
  EXPECT_EQ(storage::max_size(dir.string()), std::nullopt) << "none in the cache's file overrides the user's 2G";
  const ScopedEnv env("NPUCACHE_MAX_SIZE", "5M");
  EXPECT_EQ(storage::max_size(dir.string(), &source), std::size_t{5} << 20);
  EXPECT_EQ(source, "environment NPUCACHE_MAX_SIZE");
}

TEST_F(Settings, ABadLineNamesItsFileAndLine) {
  spit(user_file(), "cache_dir = /x\ncache_size = 5G\n");
  std::string m = message_of([] { default_cache_dir(); });
  EXPECT_NE(m.find(user_file().string() + ":2: unknown setting 'cache_size'; the settings are: cache_dir, remote"),
            std::string::npos)
      << m;
  spit(user_file(), "log_level = loud\n");
  m = message_of([] { process::setting("log_level"); });
  EXPECT_NE(m.find(":1: log_level: 'loud' is not a log level: give trace, debug"), std::string::npos) << m;
  spit(user_file(), "max_size = 12Q\n");
  m = message_of([] { process::setting("max_size"); });
  EXPECT_NE(m.find(":1: max_size: size '12Q' is not a size"), std::string::npos) << m;
  spit(user_file(), "just words\n");
  m = message_of([] { process::setting("remote"); });
  EXPECT_NE(m.find(":1: 'just words' is not a setting: write `key = value`"), std::string::npos) << m;
  fs::remove(user_file());
  fill(1);
  spit(dir / "npucache.conf", "remote = redis://h:1\n");
  m = message_of([&] { storage::max_size(dir.string()); });
  EXPECT_NE(m.find((dir / "npucache.conf").string() +
                   ":1: 'remote' cannot be set in a cache directory's npucache.conf (it holds only the cache's own "
                   "settings: max_size); set it in "),
            std::string::npos)
      << m;
}

TEST_F(Settings, ASaveLeavingTheCacheOverItsLimitWarnsOncePerProcess) {
  const auto paths = fill(3);
  storage::set_max_size(dir.string(), 1);
  std::ostringstream said;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(said);
  log::get().sinks().push_back(sink);
  const process::Context::Scope scope;  // a process of its own: Once starts afresh
  // Each save keeps what it wrote: the cache stays over its 1-byte limit.
  storage::enforce_limit(dir.string(), paths);
  storage::enforce_limit(dir.string(), paths);
  log::get().sinks().pop_back();
  const std::string text = said.str();
  const std::string warning = "over its limit 1 B: what this job saved is kept";
  const auto first = text.find(warning);
  EXPECT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find(warning, first + 1), std::string::npos) << "said twice: " << text;
}

TEST_F(Settings, ACachesFileIsTrustedAsItsOtherFilesAre) {
  fill(1);
  spit(user_file(), "max_size = 2G\n");
  const fs::path conf = dir / "npucache.conf";
  const std::string planted = (base / "planted.conf").string();
  spit(planted, "max_size = 1\n");
  // A link (to a file another user controls): not followed.
  fs::create_symlink(planted, conf);
  std::optional<std::size_t> limit;
  std::string source;
  std::string said = log_of([&] { limit = storage::max_size(dir.string(), &source); });
  EXPECT_EQ(limit, std::size_t{2} << 30) << "the user's limit holds, not the link's";
  EXPECT_EQ(source, user_file().string() + ":1");
  EXPECT_NE(
      said.find("the cache's settings are not used: refusing to use " + conf.string() + ": it is a symbolic link"),
      std::string::npos)
      << said;
  said = log_of([&] {
    storage::enforce_limit(dir.string(), {});
    storage::enforce_limit(dir.string(), {});
  });
  const auto first = said.find("the cache's settings are not used");
  EXPECT_NE(first, std::string::npos) << said;
  EXPECT_EQ(said.find("the cache's settings are not used", first + 1), std::string::npos) << "said twice: " << said;
  EXPECT_EQ(storage::all_entries(storage::Store::open(dir.string(), storage::Create::no)).size(), 1u)
      << "a save evicted by the planted limit";
  // config max-size replaces the link, not what it points to.
  storage::set_max_size(dir.string(), std::size_t{3} << 30);
  EXPECT_FALSE(fs::is_symlink(conf));
  EXPECT_EQ(slurp(planted), "max_size = 1\n");
  EXPECT_EQ(storage::max_size(dir.string()), std::size_t{3} << 30);

  // A file group or others may write: ignored.
  spit(conf, "max_size = 1\n");
  fs::permissions(conf, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_write);
  said = log_of([&] { limit = storage::max_size(dir.string()); });
  EXPECT_EQ(limit, std::size_t{2} << 30);
  EXPECT_NE(said.find("other users can write to it"), std::string::npos) << said;

  // A FIFO: refused at once, never waited on.
  fs::remove(conf);
  ASSERT_EQ(::mkfifo(conf.c_str(), 0600), 0);
  said = log_of([&] { limit = storage::max_size_or_warn(dir.string()); });
  EXPECT_EQ(limit, std::size_t{2} << 30);
  EXPECT_NE(said.find("it is not a regular file"), std::string::npos) << said;

  // Too large a file: refused, as a damaged file of the cache.
  fs::remove(conf);
  spit(conf, "# " + std::string(process::kMaxConfigFileBytes, 'x') + "\n");
  said = log_of([&] { limit = storage::max_size(dir.string()); });
  EXPECT_EQ(limit, std::size_t{2} << 30);
  EXPECT_NE(said.find("more than a cache file of its kind can be"), std::string::npos) << said;
}

TEST_F(Settings, ABadCacheFileIsAWarningWhereTheLimitIsOnlyShownOrApplied) {
  fill(1);
  spit(dir / "npucache.conf", "max_size = lots\n");
  const std::string m = message_of([&] { storage::max_size(dir.string()); });
  EXPECT_NE(m.find((dir / "npucache.conf").string() + ":1: max_size: size 'lots' is not a size"), std::string::npos)
      << m;
  std::optional<std::size_t> limit = 1;
  std::string source = "x";
  const std::string said = log_of([&] { limit = storage::max_size_or_warn(dir.string(), &source); });
  EXPECT_EQ(limit, std::nullopt);
  EXPECT_EQ(source, "");
  EXPECT_NE(said.find("no size limit applies: " + m), std::string::npos) << said;
}

TEST_F(Settings, HugeNumbersAndHugeFilesNameTheirFile) {
  const std::string digits(400, '9');
  spit(user_file(), "max_size = " + digits + "\n");
  std::string m = message_of([] { process::setting("max_size"); });
  EXPECT_NE(m.find(user_file().string() + ":1: max_size: size '" + digits + "' is out of range"), std::string::npos)
      << m;
  EXPECT_NE(message_of([&] { process::parse_size(digits + "G"); }).find("is out of range"), std::string::npos);
  EXPECT_EQ(process::parse_size("0." + std::string(400, '0') + "1K"), 0u) << "too small to be a byte";
  EXPECT_EQ(process::parse_size("1.5G"), std::size_t{3} << 29);
  EXPECT_EQ(process::parse_size("5."), 5u);
  EXPECT_NE(message_of([] { process::parse_size("1.2.3"); }).find("is not a size"), std::string::npos);
  {
    const ScopedEnv env("NPUCACHE_MAX_SIZE", digits.c_str());
    m = message_of([&] { storage::max_size(dir.string()); });
    EXPECT_NE(m.find("NPUCACHE_MAX_SIZE: size '" + digits + "' is out of range"), std::string::npos) << m;
  }
  // A line, or a file, far longer than settings are.
  spit(user_file(), "cache_dir = /x\n# " + std::string(process::kMaxConfigLineBytes, 'x') + "\n");
  m = message_of([] { process::setting("cache_dir"); });
  EXPECT_NE(m.find(user_file().string() + ":2: a line of 4098 characters, longer than a setting's"), std::string::npos)
      << m;
  std::string big;
  while (big.size() <= process::kMaxConfigFileBytes) big += "# a comment line of the user's file\n";
  spit(user_file(), big);
  m = message_of([] { process::setting("cache_dir"); });
  EXPECT_NE(m.find(user_file().string() + " is " + std::to_string(big.size()) + " bytes, more than a settings file"),
            std::string::npos)
      << m;
  // A FIFO (or a directory) where the user's file belongs: an error, never a wait.
  fs::remove(user_file());
  ASSERT_EQ(::mkfifo(user_file().c_str(), 0600), 0);
  m = message_of([] { process::setting("cache_dir"); });
  EXPECT_NE(m.find(user_file().string() + " is not a regular file"), std::string::npos) << m;
}

}  // namespace
