// The store under attack (docs/FORMAT.md): damage at many offsets of every
// file, concurrent writers of the same keys, altered bundles, full disks,
// hostile and read-only directories, and the administration commands on
// foreign files and bad values. Each case runs real processes (cache_worker,
// the npucache command) on a real directory.
#include <npucache/cache.h>
#include <npucache/error.h>

#include "admin/admin.h"
#include "format/bundle.h"
#include "format/keys.h"
#include "format/names.h"
#include "storage/store.h"
#include "support/cache_files.h"
#include "support/process.h"
#include "support/temp_dir_test.h"
#include "zstd/zstd_codec.h"

#include <gtest/gtest.h>

#include <xxhash.h>

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

using namespace npucache;
using testing_support::has;
using testing_support::Out;
using testing_support::sh;
using testing_support::slurp;
namespace fs = std::filesystem;

namespace {

const std::string kCli = NPUCACHE_CLI;

std::string worker(const fs::path& dir, const std::string& args = "prompt") {
  return std::string(CACHE_WORKER) + " run " + dir.string() + " seed " + args;
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string result_of(const std::string& text) {
  const auto at = text.find("result");
  return at == std::string::npos ? "(no result)" : text.substr(at, text.find('\n', at) - at);
}

// Every file of a directory tree with its bytes (a snapshot to compare).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.is_regular_file()) out[fs::relative(f.path(), dir).string()] = slurp(f.path());
  return out;
}

bool is_root() { return ::geteuid() == 0; }

class StoreAttack : public testing_support::TempDirTest {
 protected:
  StoreAttack() : TempDirTest("attack") {}
  void TearDown() override {
    for (const auto& m : mounts) ::umount2(m.c_str(), MNT_DETACH);
    TempDirTest::TearDown();
  }
  // A tmpfs of `bytes` at `where` (root only).
  bool mount_tmpfs(const fs::path& where, std::size_t bytes) {
    fs::create_directories(where);
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0700";
    if (::mount("tmpfs", where.c_str(), "tmpfs", 0, opts.c_str()) != 0) return false;
    mounts.push_back(where.string());
    return true;
  }
  std::vector<std::string> mounts;
};

}  // namespace

// Damage anywhere heals: a byte flipped at many offsets of every file, a
// file truncated or zeroed, is found; the next job succeeds with the right
// result, the one after it compiles nothing, and verify is then clean.
TEST_F(StoreAttack, DamageAtManyOffsetsOfEveryFileHeals) {
  Out a = sh(worker(dir)), b = sh(worker(dir, "prompt --static"));
  ASSERT_EQ(a.status, 0) << a.text;
  ASSERT_EQ(b.status, 0) << b.text;
  const std::string want_dynamic = result_of(a.text), want_static = result_of(b.text);
  const auto pristine = snapshot(dir);
  std::vector<std::string> files;
  for (const auto& [name, bytes] : pristine)
    if (name.rfind("locks/", 0) != 0 && !bytes.empty()) files.push_back(name);
  ASSERT_GE(files.size(), 6u);  // 2 indexes, 2 objects, stats, markers
  int cases = 0;
  auto check = [&](const std::string& what) {
    ++cases;
    SCOPED_TRACE(what);
    Out first = sh(worker(dir) + " ; " + worker(dir, "prompt --static"));
    ASSERT_EQ(first.status, 0) << first.text;
    EXPECT_TRUE(has(first.text, want_dynamic)) << first.text;
    EXPECT_TRUE(has(first.text, want_static)) << first.text;
    EXPECT_FALSE(has(first.text, "error")) << first.text;
    Out second = sh(worker(dir) + " && " + worker(dir, "prompt --static"));
    ASSERT_EQ(second.status, 0) << second.text;
    EXPECT_FALSE(has(second.text, "compiled 1")) << second.text;
    Out v = sh(kCli + " verify " + dir.string());
    EXPECT_EQ(v.status, 0) << v.text;
  };
  auto restore = [&] {
    fs::remove_all(dir);
    for (const auto& [name, bytes] : pristine) {
      fs::create_directories((dir / name).parent_path());
      spit(dir / name, bytes);
      fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
    }
    for (const auto& d : {dir, dir / "objects", dir / "locks"})
      fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
  };
  for (const auto& name : files) {
    const std::string& bytes = pristine.at(name);
    const std::size_t n = bytes.size();
    std::set<std::size_t> offsets = {0, 8, 13, 30, 52, 60, 200, 511, 512, 700, n / 3, n / 2, 2 * n / 3, n - 1};
    for (std::size_t off : offsets) {
      if (off >= n) continue;
      restore();
      std::string damaged = bytes;
      damaged[off] = static_cast<char>(damaged[off] ^ 0x5a);
      spit(dir / name, damaged);
      check(name + " byte " + std::to_string(off) + " flipped");
    }
    restore();
    spit(dir / name, bytes.substr(0, n / 2));
    check(name + " truncated to half");
    restore();
    spit(dir / name, "");
    check(name + " truncated to nothing");
    restore();
    spit(dir / name, std::string(n, '\0'));
    check(name + " zeroed");
  }
  EXPECT_GT(cases, 80);
}

// Concurrent writers of the same keys: every entry records the checksum of
// the object the store kept (the first writer's), every process runs the
// stored program, and verify is clean.
TEST_F(StoreAttack, ConcurrentWritersOfTheSameKeysVerifyClean) {
  std::string cmd = "(";
  for (int i = 0; i < 4; ++i) cmd += worker(dir, i % 2 ? "prompt --ge-cache" : "prompt") + " & ";
  cmd += "wait)";
  Out o = sh(cmd);
  EXPECT_FALSE(has(o.text, "error")) << o.text;
  Out v = sh(kCli + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  // ge_cache decides what a save stores, not the entry: the writers of
  // both levels share one entry and one object (the first writer's).
  EXPECT_EQ(testing_support::entry_paths(dir.string()).size(), 1u);
  // Another process with its own compile of the same key: adopts.
  const fs::path other = base / "other";
  ASSERT_EQ(sh(worker(other)).status, 0);
  ASSERT_EQ(sh(kCli + " export " + other.string() + " -o " + (base / "b.bundle").string()).status, 0);
  Out imp = sh(kCli + " import " + (base / "b.bundle").string() + " " + dir.string());
  EXPECT_EQ(imp.status, 0) << imp.text;
  Out v2 = sh(kCli + " verify " + dir.string());
  EXPECT_EQ(v2.status, 0) << v2.text;
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0\nstatus hit"));
}

// Bundles whose outer checksum is valid but whose records were altered:
// each import either succeeds with a cache that verifies and runs, or is
// rejected with a clear error and changes nothing. Sizes claimed beyond
// what the bundle can hold are refused before anything is allocated.
TEST_F(StoreAttack, AlteredBundlesAreRejectedOrImportCleanly) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(sh(worker(dir, "prompt --static --ge-cache")).status, 0);
  const fs::path file = base / "good.bundle";
  ASSERT_EQ(sh(kCli + " export " + dir.string() + " -o " + file.string()).status, 0);
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // exported bundles are private
  const std::string good = slurp(file);
  const std::string raw = zstd::decompress(std::string_view(good).substr(36), std::size_t{1} << 30);
  auto reseal = [&](const std::string& records) {
    const std::string payload = zstd::compress(records);
    std::string out = good.substr(0, 12);
    auto put = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(payload.size());
    put(records.size());
    put(XXH3_64bits(payload.data(), payload.size()));
    return out + payload;
  };
  std::mt19937_64 rng(11);
  int rejected = 0, imported = 0;
  for (int i = 0; i < 200; ++i) {
    std::string mutated = raw;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = rng() % mutated.size();
      mutated[at] = static_cast<char>(rng() % 3 == 0 ? 0xff : mutated[at] ^ (1 << (rng() % 8)));
    }
    const fs::path target = base / ("t" + std::to_string(i));
    try {
      cache::admin::import_bytes(reseal(mutated), target.string());
      ++imported;
      Out v = sh(kCli + " verify " + target.string());
      EXPECT_EQ(v.status, 0) << "mutation " << i << "\n" << v.text;
      Out run = sh(worker(target) + " ; " + worker(target, "prompt --static --ge-cache"));
      EXPECT_EQ(run.status, 0) << "mutation " << i << "\n" << run.text;
    } catch (const CacheError& e) {
      ++rejected;
      EXPECT_TRUE(has(e.what(), "bundle")) << e.what();
      EXPECT_TRUE(testing_support::entry_paths(target.string()).empty()) << "a rejected bundle wrote entries";
      EXPECT_FALSE(fs::exists(target / "objects")) << "a rejected bundle wrote objects";
    }
    fs::remove_all(target);
  }
  EXPECT_GT(rejected, 100);
  // A header claiming 2^40 or 2^34 decoded bytes: refused at once.
  for (uint64_t claim : {uint64_t{1} << 40, uint64_t{1} << 34}) {
    std::string lying = good;
    std::memcpy(lying.data() + 20, &claim, sizeof claim);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(cache::admin::import_bytes(lying, (base / "liar").string()), CacheError);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  }
  // A zstd frame inside claiming more than the header: refused.
  {
    std::string frame = zstd::compress(std::string(1 << 20, '\0'));
    std::string lying = reseal(raw);
    lying.replace(36, std::string::npos, frame);
    uint64_t len = frame.size();
    std::memcpy(lying.data() + 12, &len, sizeof len);
    uint64_t sum = XXH3_64bits(frame.data(), frame.size());
    std::memcpy(lying.data() + 28, &sum, sizeof sum);
    EXPECT_THROW(cache::admin::import_bytes(lying, (base / "liar2").string()), CacheError);
  }
}

// A full file system: the job runs uncached and says so; a cache that was
// there stays intact and keeps serving.
// Writes `path` until its file system is full.
void fill(const fs::path& path) {
  std::ofstream out(path, std::ios::binary);
  const std::string block(4096, 'x');
  while (out.write(block.data(), static_cast<std::streamsize>(block.size()))) {
  }
}

TEST_F(StoreAttack, FullDiskKeepsThePreviousCacheAndRunsUncached) {
  if (!is_root()) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const fs::path small = base / "small";
  ASSERT_TRUE(mount_tmpfs(small, 64 << 10)) << "tmpfs mount failed";
  fill(small / "filler");
  const fs::path c = small / "cache";
  // Cold into a full file system.
  Out cold = sh(worker(c, "prompt --ge-cache"));
  EXPECT_EQ(cold.status, 0) << cold.text;
  EXPECT_TRUE(has(cold.text, "No space left on device")) << cold.text;
  EXPECT_TRUE(has(cold.text, "result 4 8 12")) << cold.text;
  // Room for one entry, then full: the first stays intact and serving.
  const fs::path mid = base / "mid";
  ASSERT_TRUE(mount_tmpfs(mid, 256 << 10));
  const fs::path m = mid / "cache";
  ASSERT_EQ(sh(worker(m)).status, 0);
  fill(mid / "filler");
  Out full = sh(worker(m, "prompt --static --ge-cache"));
  EXPECT_EQ(full.status, 0) << full.text;
  EXPECT_TRUE(has(full.text, "No space left on device")) << full.text;
  fs::remove(mid / "filler");
  EXPECT_TRUE(has(sh(worker(m)).text, "compiled 0\nstatus hit"));
  Out v = sh(kCli + " verify " + m.string());
  EXPECT_EQ(v.status, 0) << v.text;
  for (const auto& f : fs::recursive_directory_iterator(m))
    EXPECT_FALSE(has(f.path().filename().string(), ".tmp.")) << "a failed write left " << f.path();
}

// Hostile directories: writable by others without the sticky bit, owned by
// someone else, a link where a subdirectory should be: refused with the
// reason, the job runs uncached, nothing is written; links planted for
// temporary names are never followed.
TEST_F(StoreAttack, HostileDirectoriesAreRefusedAndLinksNeverFollowed) {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::all, fs::perm_options::replace);  // 0777, no sticky bit
  Out o = sh(worker(dir));
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "other users can write to it")) << o.text;
  EXPECT_TRUE(has(o.text, "compiled 1")) << o.text;
  EXPECT_TRUE(fs::is_empty(dir)) << "something was written into a refused directory";
  // A link where objects/ belongs: refused, nothing written through it.
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  const fs::path elsewhere = base / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(elsewhere, dir / "objects");
  Out l = sh(worker(dir));
  EXPECT_EQ(l.status, 0) << l.text;
  EXPECT_TRUE(has(l.text, "is a symbolic link")) << l.text;
  EXPECT_TRUE(fs::is_empty(elsewhere));
  fs::remove(dir / "objects");
  // A sticky, world-writable directory is usable; links planted under the
  // temporary names a writer might use are never followed.
  fs::permissions(dir, fs::perms::all | fs::perms::sticky_bit, fs::perm_options::replace);
  const fs::path victim = base / "victim";
  spit(victim, "precious");
  fs::permissions(victim,
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  fs::perm_options::replace);
  const pid_t next = ::getpid();
  for (pid_t p = next; p < next + 64; ++p)
    for (const char* name : {"stats.json", "store.json", "CACHEDIR.TAG"})
      for (int k = 0; k < 4; ++k) {
        std::error_code ec;
        fs::create_symlink(victim,
                           dir / ("." + std::string(name) + ".tmp." + std::to_string(p) + "." + std::to_string(k)), ec);
      }
  Out s = sh(worker(dir) + " && " + worker(dir));
  EXPECT_EQ(s.status, 0) << s.text;
  EXPECT_EQ(slurp(victim), "precious");
  struct stat st;
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "the victim's mode changed";
  if (!is_root()) GTEST_SKIP() << "changing a directory's owner needs root";
  const fs::path foreign = base / "foreign";
  fs::create_directories(foreign);
  ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534), 0);
  Out f = sh(worker(foreign));
  EXPECT_EQ(f.status, 0) << f.text;
  EXPECT_TRUE(has(f.text, "owned by uid 65534")) << f.text;
  EXPECT_TRUE(fs::is_empty(foreign));
}

// A read-only cache serves its hits and runs misses uncached with one
// warning.
TEST_F(StoreAttack, ReadOnlyCacheServesHitsAndWarnsOnce) {
  if (!is_root()) GTEST_SKIP() << "a read-only bind mount needs root";
  ASSERT_EQ(sh(worker(dir)).status, 0);
  ASSERT_EQ(::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr), 0);
  mounts.push_back(dir.string());
  ASSERT_EQ(::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0);
  Out hit = sh(worker(dir));
  EXPECT_EQ(hit.status, 0) << hit.text;
  EXPECT_TRUE(has(hit.text, "compiled 0\nstatus hit")) << hit.text;
  Out miss = sh(worker(dir, "prompt --static"));
  EXPECT_EQ(miss.status, 0) << miss.text;
  EXPECT_TRUE(has(miss.text, "Read-only file system")) << miss.text;
  std::size_t warnings = 0;
  for (std::size_t at = miss.text.find("running uncached"); at != std::string::npos;
       at = miss.text.find("running uncached", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << miss.text;
}

// Administration: sizes parsed strictly; gc evicts whole layouts, least
// recently used first; gc and clear touch only npucache's files; clear on a
// directory without a cache creates nothing; a persistent limit evicts
// after writes.
TEST_F(StoreAttack, AdministrationIsStrictAndTouchesOnlyItsOwnFiles) {
  for (const char* bad : {"1e30", "20000000000G", "nan", "-1", "abc", "1.5.5", "", "64Q"}) {
    Out o = sh(kCli + " gc " + base.string() + " --max-size '" + bad + "'");
    EXPECT_EQ(o.status, 2) << bad << "\n" << o.text;
    EXPECT_TRUE(has(o.text, "size '" + std::string(bad) + "'")) << o.text;
  }
  EXPECT_EQ(cache::parse_size("64M"), std::size_t{64} << 20);
  EXPECT_EQ(cache::parse_size("1.5G"), std::size_t{3} << 29);
  // Two layouts (a 2-rank job's and a single process's), the 2-rank one
  // used longer ago.
  ASSERT_EQ(sh(worker(dir, "prompt --world 2 --rank 0") + " && " + worker(dir, "prompt --world 2 --rank 1")).status, 0);
  ::sleep(1);
  ASSERT_EQ(sh(worker(dir, "prompt --static")).status, 0);
  ASSERT_EQ(testing_support::entry_paths(dir.string()).size(), 3u);
  // Foreign files: an .h5 that is not an index, junk named like an object.
  spit(dir / "foreign.h5", "\x89HDF\r\n\x1a\nnot npucache's");
  spit(dir / "objects" / "0123456789abcdef0123456789abcdef.h5", "junk");
  spit(dir / "notes.txt", "mine");
  const auto before_foreign = slurp(dir / "foreign.h5");
  Out gc = sh(kCli + " gc " + dir.string() + " --max-size 20K");
  EXPECT_EQ(gc.status, 0) << gc.text;
  EXPECT_TRUE(has(gc.text, "skipped index " + (dir / "foreign.h5").string())) << gc.text;
  EXPECT_TRUE(has(gc.text, "left " + (dir / "objects" / "0123456789abcdef0123456789abcdef.h5").string())) << gc.text;
  auto left = testing_support::entry_paths(dir.string());
  ASSERT_EQ(left.size(), 1u) << gc.text;
  EXPECT_TRUE(has(left[0], "Model_static_")) << "the whole 2-rank layout goes first";
  EXPECT_EQ(slurp(dir / "foreign.h5"), before_foreign);
  EXPECT_EQ(slurp(dir / "notes.txt"), "mine");
  // clear removes npucache's files only, and says what it left.
  Out clear = sh(kCli + " clear " + dir.string());
  EXPECT_EQ(clear.status, 0) << clear.text;
  EXPECT_TRUE(has(clear.text, "left " + (dir / "foreign.h5").string())) << clear.text;
  EXPECT_EQ(slurp(dir / "foreign.h5"), before_foreign);
  EXPECT_EQ(slurp(dir / "objects" / "0123456789abcdef0123456789abcdef.h5"), "junk");
  EXPECT_TRUE(testing_support::entry_paths(dir.string()).empty());
  // clear where there is no cache: says so, creates nothing.
  const fs::path none = base / "none";
  Out n = sh(kCli + " clear " + none.string());
  EXPECT_EQ(n.status, 0) << n.text;
  EXPECT_TRUE(has(n.text, "no npucache cache")) << n.text;
  EXPECT_FALSE(fs::exists(none));
  if (is_root()) {
    Out r = sh(kCli + " clear /");
    EXPECT_TRUE(has(r.text, "no npucache cache")) << r.text;
    EXPECT_FALSE(fs::exists("/.lock"));
    EXPECT_FALSE(fs::exists("/locks"));
    EXPECT_FALSE(fs::exists("/objects"));
  }
  // A persistent limit: the next write evicts the least recently used.
  const fs::path lim = base / "limited";
  ASSERT_EQ(sh(worker(lim)).status, 0);
  Out cfg = sh(kCli + " config max-size 1 --cache-dir " + lim.string());
  EXPECT_EQ(cfg.status, 0) << cfg.text;
  ASSERT_EQ(sh(worker(lim, "prompt --static")).status, 0);
  auto kept = testing_support::entry_paths(lim.string());
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(has(kept[0], "Model_static_")) << "the entry just written stays";
  Out stats = sh(kCli + " stats " + lim.string());
  EXPECT_TRUE(has(stats.text, "limit            1 B")) << stats.text;
  // Bad statistics and bad directories: clear errors, never an abort.
  spit(lim / "stats.json", "{\"hits\": \"abc\", \"last_used\": [1, 2]}");
  EXPECT_EQ(sh(kCli + " stats " + lim.string()).status, 0);
  spit(base / "a-file", "x");
  Out f = sh(kCli + " ls " + (base / "a-file").string());
  EXPECT_EQ(f.status, 1) << f.text;
  EXPECT_TRUE(has(f.text, "not a directory")) << f.text;
  Out p = sh(kCli + " ls /proc/x");
  EXPECT_EQ(p.status, 1) << p.text;
  EXPECT_TRUE(has(p.text, "no cache in /proc/x")) << p.text;
  Out w = sh(worker(base / "a-file"));
  EXPECT_EQ(w.status, 0) << w.text;
  EXPECT_TRUE(has(w.text, "running uncached")) << w.text;
}

// An object rebuilt after damage has other bytes (timings, autotune picks)
// for the same computation: entries of other ranks that share it still
// hit, verify is clean, and verify --repair keeps them (restamped). An
// entry that reuses an object another method stored carries its own name.
TEST_F(StoreAttack, RebuiltObjectsKeepTheirSharersAndEntriesTheirNames) {
  ASSERT_EQ(sh(worker(dir, "prompt --world 2 --rank 0") + " && " + worker(dir, "prompt --world 2 --rank 1")).status, 0);
  auto entries = testing_support::entries(dir.string());
  ASSERT_EQ(entries.size(), 2u);
  ASSERT_EQ(entries[0].graph_key, entries[1].graph_key) << "both ranks share one object";
  const fs::path object = dir / "objects" / (entries[0].graph_key + ".h5");
  std::string bytes = slurp(object);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  fs::permissions(object, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  spit(object, bytes);
  Out rebuilt = sh(worker(dir, "prompt --world 2 --rank 0"));
  EXPECT_TRUE(has(rebuilt.text, "compiled 1")) << rebuilt.text;
  Out other = sh(worker(dir, "prompt --world 2 --rank 1"));
  EXPECT_TRUE(has(other.text, "compiled 0\nstatus hit")) << other.text;
  Out v = sh(kCli + " verify " + dir.string());
  EXPECT_EQ(v.status, 0) << v.text;
  Out r = sh(kCli + " verify --repair " + dir.string());
  EXPECT_EQ(r.status, 0) << r.text;
  EXPECT_EQ(testing_support::entries(dir.string()).size(), 2u) << r.text;
  // Another method name, the same computation: the stored object is
  // reused, and the new entry is named after its own method.
  Out d = sh(worker(dir, "decode --world 2 --rank 0"));
  EXPECT_TRUE(has(d.text, "compiled 0")) << d.text;
  bool found = false;
  for (const auto& e : testing_support::entries(dir.string()))
    if (has(e.path, "/decode")) {
      found = true;
      EXPECT_TRUE(has(e.meta.name, "Model.decode(")) << e.meta.name;
    }
  EXPECT_TRUE(found);
}

// A method name that cannot name an entry is refused before anything is
// written, naming the rule.
TEST_F(StoreAttack, MalformedMethodNamesAreRefused) {
  for (const char* bad : {"pro mpt", "../x", ".hidden", "a/b"}) {
    Out o = sh(worker(dir, "'" + std::string(bad) + "'"));
    EXPECT_NE(o.status, 0) << bad;
    EXPECT_TRUE(has(o.text, "cannot name a cache entry")) << o.text;
  }
  EXPECT_TRUE(testing_support::entries(dir.string()).empty());
}

// gc never removes an object a writer has stored but not yet indexed: it
// waits for writers (the sweep lock), and writers for it.
TEST_F(StoreAttack, GcWaitsForWritersBetweenObjectAndIndex) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const cache::Store s = cache::Store::open(dir.string(), cache::Create::no);
  Out started;
  {
    const cache::Writing writing = s.writing();
    // gc in the background; it must still be waiting a second later.
    started = sh("(" + kCli + " gc " + dir.string() + " --max-size 0 > " + (base / "gc.out").string() +
                 " 2>&1; echo done > " + (base / "gc.done").string() + ") > /dev/null 2>&1 < /dev/null & echo started");
    ::sleep(1);
    EXPECT_FALSE(fs::exists(base / "gc.done")) << "gc ran while a writer was between its object and its index";
  }
  for (int i = 0; i < 100 && !fs::exists(base / "gc.done"); ++i) ::usleep(100000);
  EXPECT_TRUE(fs::exists(base / "gc.done")) << slurp(base / "gc.out");
  EXPECT_TRUE(has(slurp(base / "gc.out"), "gc: evicted")) << slurp(base / "gc.out");
}

// store.json of another format version still names its store (the id is
// kept); a damaged one is healed with a new id.
TEST_F(StoreAttack, StoreIdSurvivesAFormatVersionChange) {
  ASSERT_EQ(sh(worker(dir)).status, 0);
  const std::string before = slurp(dir / "store.json");
  const auto at = before.find("\"format_version\": \"");
  ASSERT_NE(at, std::string::npos);
  std::string other = before;
  other.replace(at, before.find('"', at + 19) - at + 1, "\"format_version\": \"9.1.0\"");
  spit(dir / "store.json", other);
  Out v = sh(kCli + " verify " + dir.string());
  EXPECT_FALSE(has(v.text, "store.json is damaged")) << v.text;
  const cache::Store s = cache::Store::open(dir.string(), cache::Create::no);
  EXPECT_EQ(s.identity().substr(0, 32), before.substr(before.find("\"store_id\": \"") + 13, 32));
}

// A bundle whose entries name impossible ranks, or disagree on their
// model's components, is refused before anything is written.
TEST_F(StoreAttack, BundlesWithImpossibleRanksOrMixedModelsAreRefused) {
  ASSERT_EQ(sh(worker(dir, "prompt --world 2 --rank 0") + " && " + worker(dir, "prompt --world 2 --rank 1")).status, 0);
  const fs::path file = base / "b.bundle";
  cache::admin::export_bundle(dir.string(), file.string());
  const cache::Bundle good = cache::read_bundle(slurp(file));
  ASSERT_EQ(good.entries.size(), 2u);
  auto rejected = [&](cache::Bundle b, const std::string& why) {
    const fs::path to = base / "into";
    fs::remove_all(to);
    try {
      cache::admin::import_bytes(cache::write_bundle(b), to.string());
      ADD_FAILURE() << "imported a bundle that " << why;
    } catch (const CacheError& e) {
      EXPECT_TRUE(has(e.what(), why)) << e.what();
    }
    EXPECT_TRUE(testing_support::entries(to.string()).empty());
  };
  cache::Bundle b = good;
  b.entries[0].meta.rank.global_rank = -1;
  rejected(b, "names rank -1");
  b = good;
  b.entries[1].meta.rank.global_rank = 2;
  rejected(b, "names rank 2");
  b = good;
  b.entries[1].meta.components.at(cache::component::kParameterSignature) += "x";
  rejected(b, "disagree on its model components");
}

// A parent of the cache directory that is a link owned by another user is
// refused (it could point the cache, and what is written, anywhere).
TEST_F(StoreAttack, ParentLinksOfOtherUsersAreRefused) {
  if (!is_root()) GTEST_SKIP() << "making a link owned by another user needs root";
  const fs::path real = base / "real";
  fs::create_directories(real);
  fs::create_symlink(real, base / "link");
  ASSERT_EQ(::lchown((base / "link").c_str(), 65534, 65534), 0);
  Out o = sh(worker(base / "link" / "cache"));
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "is a symbolic link owned by uid 65534")) << o.text;
  EXPECT_TRUE(fs::is_empty(real)) << "something was written through the link";
  // The user's own link is fine.
  ASSERT_EQ(::lchown((base / "link").c_str(), 0, 0), 0);
  Out ok = sh(worker(base / "link" / "cache"));
  EXPECT_TRUE(has(ok.text, "compiled 1")) << ok.text;
  EXPECT_TRUE(fs::exists(real / "cache" / "store.json"));
}

// A cache directory given as the user's own symbolic link (a dotfile link
// to a bigger disk) is used through its target; a link of someone else, or
// a link to someone else's directory, is refused.
TEST_F(StoreAttack, OwnLinkAsTheCacheDirectoryIsFollowed) {
  const fs::path real = base / "bigdisk";
  fs::create_directories(real);
  fs::permissions(real, fs::perms::owner_all, fs::perm_options::replace);
  fs::create_symlink(real, base / "link");
  Out cold = sh(worker(base / "link"));
  ASSERT_EQ(cold.status, 0) << cold.text;
  EXPECT_TRUE(has(cold.text, "compiled 1\nstatus compiled")) << cold.text;
  EXPECT_TRUE(fs::exists(real / "store.json"));
  EXPECT_TRUE(fs::is_symlink(base / "link"));
  Out warm = sh(worker(base / "link"));
  EXPECT_TRUE(has(warm.text, "compiled 0\nstatus hit")) << warm.text;
  // A dangling link is an error naming it, and nothing is created.
  fs::create_symlink(base / "missing", base / "dangling");
  Out dangling = sh(worker(base / "dangling"));
  EXPECT_TRUE(has(dangling.text, "whose target cannot be resolved")) << dangling.text;
  EXPECT_FALSE(fs::exists(base / "missing"));
  if (!is_root()) GTEST_SKIP() << "making links and directories of another user needs root";
  ASSERT_EQ(::lchown((base / "link").c_str(), 65534, 65534), 0);
  Out foreign_link = sh(worker(base / "link"));
  EXPECT_TRUE(has(foreign_link.text, "is a symbolic link owned by uid 65534")) << foreign_link.text;
  EXPECT_TRUE(has(foreign_link.text, "compiled 1")) << foreign_link.text;  // uncached, not served
  ASSERT_EQ(::lchown((base / "link").c_str(), ::geteuid(), ::getegid()), 0);
  ASSERT_EQ(::chown(real.c_str(), 65534, 65534), 0);
  Out foreign_target = sh(worker(base / "link"));
  EXPECT_TRUE(has(foreign_target.text, "owned by uid 65534")) << foreign_target.text;
  EXPECT_TRUE(has(foreign_target.text, "compiled 1")) << foreign_target.text;
}

// Files or directories inside the cache that others can write are never
// trusted: the method runs uncached with a warning naming the file.
TEST_F(StoreAttack, GroupOrWorldWritableFilesInsideAreRefused) {
  Out cold = sh(worker(dir));
  ASSERT_EQ(cold.status, 0) << cold.text;
  fs::path object;
  for (const auto& f : fs::directory_iterator(dir / "objects")) object = f.path();
  ASSERT_FALSE(object.empty());
  for (const fs::perms extra : {fs::perms::group_write, fs::perms::others_write}) {
    fs::permissions(object, fs::perms::owner_read | fs::perms::owner_write | extra, fs::perm_options::replace);
    Out o = sh(worker(dir));
    EXPECT_EQ(o.status, 0) << o.text;
    EXPECT_TRUE(has(o.text, "other users can write to it")) << o.text;
    EXPECT_TRUE(has(o.text, object.filename().string())) << o.text;
    EXPECT_TRUE(has(o.text, "running uncached")) << o.text;
    EXPECT_TRUE(has(o.text, "result 4 8 12")) << o.text;
  }
  fs::permissions(object, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  EXPECT_TRUE(has(sh(worker(dir)).text, "compiled 0\nstatus hit"));
  // A directory inside the cache: a sticky bit does not excuse it there.
  fs::permissions(dir / "objects", fs::perms::all | fs::perms::sticky_bit, fs::perm_options::replace);
  Out d = sh(worker(dir));
  EXPECT_TRUE(has(d.text, "other users can write to it (mode 1777)")) << d.text;
  EXPECT_TRUE(has(d.text, "result 4 8 12")) << d.text;
}

// The names a cache may hold: what the layout writes is valid, and
// nothing that could step out of the directory or be confused with
// another layout is.
TEST(Layout, EntryPathGrammar) {
  using cache::names::entry_path;
  using cache::names::valid_entry_path;
  EXPECT_TRUE(valid_entry_path("Model_dynamic_0123456789abcdef/prompt"));
  EXPECT_TRUE(valid_entry_path(entry_path("M_static_1", "decode", 8, 7)));
  EXPECT_TRUE(valid_entry_path(entry_path("M_static_1", "decode", 999999999, 0)));
  EXPECT_EQ(entry_path("M", "f", 8, 7), "M/world8global_rank7/f");
  for (const char* bad :
       {"", "M", "/f", "M/", "../M/f", "M/../f", ".M/f", "M/.f", "M/world0global_rank0/f", "M/world08global_rank1/f",
        "M/world8global_rank07/f", "M/world8global_rank/f", "M/world1234567890global_rank1/f",
        "M/world8global_rank1x/f", "M/world8/f", "M/a/b/f", "M/wor ld8global_rank1/f", "M/f g"})
    EXPECT_FALSE(valid_entry_path(bad)) << bad;
}

// An entry that binds parameters the module does not have (altered, or
// written for another module) is a miss that is rebuilt, never an error
// of the user's call.
TEST_F(StoreAttack, EntriesBindingOtherParametersAreRebuilt) {
  ASSERT_EQ(sh(worker(dir, "prompt --code-version v9")).status, 0);
  const fs::path file = base / "b.bundle";
  cache::admin::export_bundle(dir.string(), file.string());
  cache::Bundle b = cache::read_bundle(slurp(file));
  ASSERT_EQ(b.entries.size(), 1u);
  ASSERT_FALSE(b.entries[0].parameters.empty());
  b.entries[0].parameters[0] += "_renamed";
  // The default hit check: the trace reads other parameters than the entry
  // names, so the entry is not served; the object is, bound to the trace's.
  const fs::path traced = base / "traced";
  cache::admin::import_bytes(cache::write_bundle(b), traced.string());
  Out o = sh(worker(traced));
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "the graph reads other parameters: stored [linear2.weight_renamed")) << o.text;
  EXPECT_TRUE(has(o.text, "result 4 8 12")) << o.text;
  // The fast path (no trace to compare with): the entry's names are bound
  // and checked against the module, and the entry is rebuilt.
  const fs::path fast = base / "fast";
  cache::admin::import_bytes(cache::write_bundle(b), fast.string());
  Out f = sh(worker(fast, "prompt --fast --code-version v9"));
  EXPECT_EQ(f.status, 0) << f.text;
  EXPECT_TRUE(has(f.text, "does not fit this module")) << f.text;
  EXPECT_TRUE(has(f.text, "_renamed")) << f.text;
  EXPECT_TRUE(has(f.text, "result 4 8 12")) << f.text;
  for (const fs::path& d : {traced, fast}) {
    Out again = sh(worker(d, "prompt --fast --code-version v9"));
    EXPECT_TRUE(has(again.text, "compiled 0\nstatus hit")) << again.text;
    EXPECT_TRUE(has(again.text, "result 4 8 12")) << again.text;
  }
}
