// A model's index as a base and deltas (docs/FORMAT.md, "Index file"): a
// commit into a big model writes what it changes, not the model; readers
// merge the base and its deltas as one whole state through compactions,
// kills, concurrent writers and damage; gc, verify, ls and h5dump see every
// entry.
#include "format/names.h"
#include "process/context.h"
#include "storage/store.h"
#include "support/fault_env.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using namespace npucache;

namespace {

const std::string kModel = "Big_dynamic_00000000000000aa";
const storage::Components kComponents = {{"model_class", "Big"}};

storage::EntryRecord entry(const std::string& func, const std::string& key = std::string(32, 'a')) {
  storage::EntryRecord e;
  e.path = kModel + "/" + func;
  e.graph_key = key;
  e.meta.name = "Big." + func + "(x)";
  e.meta.model_info = kModel;
  e.meta.components["runtime_version"] = "test";
  e.parameters = {"w"};
  e.object_checksum = "0123456789abcdef";
  return e;
}

std::vector<storage::EntryRecord> entries(int from, int to) {
  std::vector<storage::EntryRecord> out;
  for (int i = from; i < to; ++i) out.push_back(entry("f" + std::to_string(i)));
  return out;
}

std::set<std::string> paths(const storage::Store& s) {
  std::set<std::string> out;
  if (auto d = s.index(kModel))
    for (const auto& e : d->index.entries) out.insert(e.path);
  return out;
}

struct Out {
  int status;
  std::string text;
};
Out sh(const std::string& cmd) {
  Out o{0, ""};
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) o.text.append(buf, n);
  o.status = WEXITSTATUS(::pclose(p));
  return o;
}

std::size_t delta_files(const fs::path& dir) {
  std::size_t n = 0;
  if (fs::exists(dir / "deltas"))
    for (const auto& f : fs::directory_iterator(dir / "deltas")) n += f.path().filename().string()[0] != '.';
  return n;
}

void flip(const fs::path& f, std::size_t at) {
  std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  io.get(c);
  io.seekp(static_cast<std::streamoff>(at));
  io.put(static_cast<char>(c ^ 0x5a));
}

class IndexDeltas : public testing_support::TempDirTest {
 protected:
  IndexDeltas() : TempDirTest("deltas") {}
  storage::Store store() const { return storage::Store::open(dir, storage::Create::yes); }
};

// Writing one entry into a model of 3000 leaves its base alone and writes
// a few KiB, however many commits follow (until a compaction, amortised).
TEST_F(IndexDeltas, CommitIntoABigModelWritesWhatItChanges) {
  const storage::Store s = store();
  s.update_index(kModel, kComponents, entries(0, 3000), {});
  const fs::path base_file = dir / storage::names::index_file(kModel);
  const auto base_size = fs::file_size(base_file);
  struct stat before {};
  ASSERT_EQ(::stat(base_file.c_str(), &before), 0);
  for (int i = 0; i < 40; ++i) {
    s.update_index(kModel, kComponents, {entry("new" + std::to_string(i))}, {});
    struct stat now {};
    ASSERT_EQ(::stat(base_file.c_str(), &now), 0);
    EXPECT_EQ(now.st_ino, before.st_ino) << "commit " << i << " rewrote the base";
    std::uintmax_t delta_bytes = 0;
    for (const auto& f : fs::directory_iterator(dir / "deltas")) delta_bytes += f.file_size();
    // 40 entries at most, each a few hundred bytes, against a base of 3000.
    EXPECT_LT(delta_bytes, base_size / 20) << "commit " << i;
    EXPECT_LE(delta_files(dir), 7u) << "commit " << i;
  }
  EXPECT_EQ(paths(s).size(), 3040u);
  // In a fresh process the same.
  Out o = sh(std::string(NPUCACHE_CLI) + " ls " + dir.string() + " --json | grep -c '\"path\"'");
  EXPECT_NE(o.text.find("3040"), std::string::npos) << o.text;
}

// Commits, replacements and removals across many compactions: after each,
// a reader sees exactly what was committed; deltas stay few.
TEST_F(IndexDeltas, EveryStateIsTheCommittedOneAcrossCompactions) {
  const storage::Store s = store();
  std::set<std::string> expect;
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    const int k = static_cast<int>(rng() % 60);
    const std::string p = kModel + "/f" + std::to_string(k);
    if (rng() % 4 == 0) {
      s.update_index(kModel, kComponents, {}, {p});
      expect.erase(p);
    } else {
      s.update_index(kModel, kComponents, {entry("f" + std::to_string(k), std::string(32, "0123456789abcdef"[i % 16]))},
                     {});
      expect.insert(p);
    }
    ASSERT_EQ(paths(s), expect) << "commit " << i;
    ASSERT_EQ(paths(storage::Store::open(dir, storage::Create::no)), expect);
    EXPECT_LE(delta_files(dir), 12u);
    if (auto d = s.index(kModel)) {
      EXPECT_TRUE(d->intact);
      for (const auto& e : d->index.entries)
        if (e.path == kModel + "/f" + std::to_string(k) && expect.count(e.path)) {
          EXPECT_EQ(e.graph_key, std::string(32, "0123456789abcdef"[i % 16]));
        }
    }
  }
  // Removing every entry removes the model.
  std::vector<std::string> all(expect.begin(), expect.end());
  s.update_index(kModel, kComponents, {}, all);
  EXPECT_FALSE(s.index(kModel));
  EXPECT_FALSE(fs::exists(dir / storage::names::index_file(kModel)));
  EXPECT_EQ(delta_files(dir), 0u);
}

// The crash window of a compaction: the new base is in place, the deltas
// not yet removed. A delta of the earlier base is never applied to it.
TEST_F(IndexDeltas, DeltasLeftBehindByACompactionAreNeverApplied) {
  const storage::Store s = store();
  s.update_index(kModel, kComponents, entries(0, 40), {});
  s.update_index(kModel, kComponents, {entry("f1", std::string(32, 'b'))}, {kModel + "/f2"});
  const fs::path aside = dir / "aside";
  fs::create_directories(aside);
  for (const auto& f : fs::directory_iterator(dir / "deltas")) fs::copy(f.path(), aside / f.path().filename());
  s.update_index(kModel, kComponents, entries(100, 140), {});  // more than the deltas may hold: a new base
  EXPECT_EQ(delta_files(dir), 0u);
  const auto now = paths(s);
  for (const auto& f : fs::directory_iterator(aside)) fs::copy(f.path(), dir / "deltas" / f.path().filename());
  EXPECT_EQ(paths(storage::Store::open(dir, storage::Create::no)), now);
  // ...and a later commit does not take it for its own.
  s.update_index(kModel, kComponents, {}, {kModel + "/f1"});
  EXPECT_EQ(paths(s).size(), now.size() - 1);
  EXPECT_TRUE(paths(s).count(kModel + "/f2") == 0);
}

// Writers of one model in several processes: every entry of each is there.
TEST_F(IndexDeltas, ConcurrentWritersOfOneModelLoseNothing) {
  store().update_index(kModel, kComponents, entries(0, 100), {});
  std::vector<pid_t> kids;
  for (int w = 0; w < 4; ++w) {
    pid_t pid = ::fork();
    if (pid == 0) {
      const storage::Store s = storage::Store::open(dir, storage::Create::no);
      for (int i = 0; i < 30; ++i)
        s.update_index(kModel, kComponents, {entry("w" + std::to_string(w) + "_" + std::to_string(i))}, {});
      ::_exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(paths(store()).size(), 100u + 4 * 30);
}

// Readers during a writer's commits and compactions (another process):
// each read is a whole committed state, never fewer entries than before.
TEST_F(IndexDeltas, ReadersDuringCompactionsSeeWholeStates) {
  store().update_index(kModel, kComponents, entries(0, 40), {});
  pid_t pid = ::fork();
  if (pid == 0) {
    const storage::Store s = storage::Store::open(dir, storage::Create::no);
    for (int i = 40; i < 400; ++i) s.update_index(kModel, kComponents, {entry("f" + std::to_string(i))}, {});
    ::_exit(0);
  }
  std::size_t last = 40;
  int reads = 0;
  for (;;) {
    int status = 0;
    const bool done = ::waitpid(pid, &status, WNOHANG) == pid;
    const auto now = paths(storage::Store::open(dir, storage::Create::no));
    ++reads;
    ASSERT_GE(now.size(), last) << "read " << reads << " lost entries";
    // The writer commits f40, f41, ... in order: a whole state is a prefix.
    for (std::size_t i = 0; i < now.size(); ++i)
      ASSERT_TRUE(now.count(kModel + "/f" + std::to_string(i))) << "read " << reads << ": a hole at f" << i;
    last = now.size();
    if (done) break;
  }
  EXPECT_EQ(last, 400u);
}

// A writer killed at any moment (in a delta's write, a merge, a
// compaction) leaves a whole state: a prefix of its commits, never less
// than what was there.
TEST_F(IndexDeltas, KillDuringDeltaWritesAndCompactionsLeavesAWholeState) {
  store().update_index(kModel, kComponents, entries(0, 40), {});
  std::mt19937 rng(11);
  std::size_t last = 40;
  for (int round = 0; round < 10; ++round) {
    const int from = static_cast<int>(last);
    pid_t pid = ::fork();
    if (pid == 0) {
      const storage::Store s = storage::Store::open(dir, storage::Create::no);
      for (int i = from; i < from + 1000; ++i)
        s.update_index(kModel, kComponents, {entry("f" + std::to_string(i))}, {});
      ::_exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const storage::Store s = storage::Store::open(dir, storage::Create::no);
    const auto d = s.index(kModel);
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->intact && d->hdf5_intact) << "round " << round;
    const auto now = paths(s);
    ASSERT_GE(now.size(), last) << "round " << round;
    for (std::size_t i = 0; i < now.size(); ++i)
      ASSERT_TRUE(now.count(kModel + "/f" + std::to_string(i))) << "round " << round << ": a hole at f" << i;
    last = now.size();
  }
  EXPECT_GT(last, 30u);
}

// A damaged delta: its readable entries are served, the index reports the
// damage (verify too), and the next commit salvages it into a new base.
TEST_F(IndexDeltas, DamagedDeltaIsReportedAndSalvaged) {
  const storage::Store s = store();
  s.update_index(kModel, kComponents, entries(0, 40), {});
  s.update_index(kModel, kComponents, {entry("x1"), entry("x2"), entry("x3")}, {});
  const fs::path delta = dir / "deltas" / storage::names::delta_file(kModel, 1);
  ASSERT_TRUE(fs::exists(delta));
  // Damage a byte of one entry record (x2) of the delta.
  std::ifstream in(delta, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto at = bytes.find(kModel + "/x2");
  ASSERT_NE(at, std::string::npos);
  flip(delta, at + 3);
  auto d = s.index(kModel);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->intact);
  EXPECT_EQ(d->damaged, 1u);
  EXPECT_EQ(d->index.entries.size(), 42u);
  EXPECT_TRUE(s.index_damaged(kModel));
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_NE(v.text.find("1 record(s) damaged; 42 readable"), std::string::npos) << v.text;
  EXPECT_EQ(s.update_index(kModel, kComponents, {entry("y")}, {}), 1u);
  EXPECT_EQ(delta_files(dir), 0u);
  d = s.index(kModel);
  EXPECT_TRUE(d->intact);
  EXPECT_EQ(d->index.entries.size(), 43u);
  // A delta whose header is damaged: what it and later deltas added is
  // lost (the base and earlier deltas served), and reported.
  s.update_index(kModel, kComponents, {entry("z1")}, {});
  s.update_index(kModel, kComponents, {entry("z2")}, {});
  std::vector<fs::path> ds;
  for (const auto& f : fs::directory_iterator(dir / "deltas")) ds.push_back(f.path());
  ASSERT_FALSE(ds.empty());
  flip(ds.front(), 3);
  d = s.index(kModel);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->intact);
  ASSERT_EQ(d->problems.size(), 1u);
  EXPECT_NE(d->problems[0].find("the entries it and later deltas added are lost"), std::string::npos);
  v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_NE(v.text.find("later deltas added are lost"), std::string::npos) << v.text;
  EXPECT_NE(v.status, 0);
  Out r = sh(std::string(NPUCACHE_CLI) + " verify --repair " + dir.string());
  EXPECT_EQ(delta_files(dir), 0u) << r.text;
  // (Its entries' objects are not stored: the repair removed them all.)
  EXPECT_FALSE(s.index(kModel)) << r.text;
}

// h5dump shows a delta's entries at the seed's paths, its link to the
// object one directory up; ls, verify and gc see the entries of deltas.
TEST_F(IndexDeltas, ToolsSeeDeltaEntries) {
  const storage::Store s = store();
  storage::ObjectRecord o;
  o.graph_key = std::string(32, 'c');
  o.raw = "not a program";
  o.graph_text = {"graph"};
  o.meta.raw_size = o.raw.size();
  o.meta.checksum = storage::checksum(o.raw);
  o.meta.checksum = s.put_object(o, s.writing()).stored.meta.checksum;
  auto e = [&](const std::string& f) {
    storage::EntryRecord x = entry(f, o.graph_key);
    x.object_checksum = o.meta.checksum;
    return x;
  };
  // A model of more entries than are always rewritten whole.
  std::vector<storage::EntryRecord> many{e("a"), e("b"), e("c")};
  for (int i = 0; i < 40; ++i) many.push_back(e("p" + std::to_string(i)));
  s.update_index(kModel, kComponents, many, {});
  s.update_index(kModel, kComponents, {e("d")}, {kModel + "/a"});
  const fs::path delta = dir / "deltas" / storage::names::delta_file(kModel, 1);
  ASSERT_TRUE(fs::exists(delta));
  Out h = sh("h5dump -H " + delta.string());
  EXPECT_EQ(h.status, 0) << h.text;
  EXPECT_NE(h.text.find("GROUP \"" + kModel + "\""), std::string::npos) << h.text;
  EXPECT_NE(h.text.find("GROUP \"d\""), std::string::npos) << h.text;
  EXPECT_NE(h.text.find("../objects/" + o.graph_key + ".h5"), std::string::npos) << h.text;
  EXPECT_NE(h.text.find("\"removed\""), std::string::npos) << h.text;
  Out ls = sh(std::string(NPUCACHE_CLI) + " ls " + dir.string());
  EXPECT_NE(ls.text.find(kModel + "/d"), std::string::npos) << ls.text;
  EXPECT_EQ(ls.text.find(kModel + "/a "), std::string::npos) << ls.text;
  EXPECT_NE(ls.text.find("43 entries"), std::string::npos) << ls.text;
  Out v = sh(std::string(NPUCACHE_CLI) + " verify " + dir.string());
  EXPECT_NE(v.text.find("43 entries"), std::string::npos) << v.text;
  Out gc = sh(std::string(NPUCACHE_CLI) + " gc " + dir.string() + " --model " + kModel);
  EXPECT_EQ(gc.status, 0) << gc.text;
  EXPECT_FALSE(s.index(kModel)) << gc.text;
  EXPECT_EQ(delta_files(dir), 0u);
  // clear removes the deltas directory with the rest.
  s.update_index(kModel, kComponents, many, {});
  s.update_index(kModel, kComponents, {e("d")}, {});
  ASSERT_EQ(delta_files(dir), 1u);
  Out c = sh(std::string(NPUCACHE_CLI) + " clear " + dir.string());
  EXPECT_EQ(c.status, 0) << c.text;
  EXPECT_FALSE(fs::exists(dir / "deltas")) << c.text;
}

// A model of few entries (every demo, most programs) is rewritten whole:
// one file, every entry in h5dump of it, no delta; past the threshold its
// commits become deltas.
TEST_F(IndexDeltas, SmallModelIsOneFile) {
  const storage::Store s = store();
  for (int i = 0; i < 32; ++i) {
    s.update_index(kModel, kComponents, {entry("f" + std::to_string(i))}, {});
    ASSERT_EQ(delta_files(dir), 0u) << "commit " << i;
  }
  Out h = sh("h5dump -H " + (dir / storage::names::index_file(kModel)).string());
  EXPECT_NE(h.text.find("GROUP \"f31\""), std::string::npos) << h.text;
  s.update_index(kModel, kComponents, {entry("f32")}, {});
  EXPECT_EQ(delta_files(dir), 1u);
  EXPECT_EQ(paths(s).size(), 33u);
}

bool rewrite_in_the_same_second(testing_support::FaultEnv& env, const fs::path& dir, const fs::path& base_file,
                                char key);

// A process keeps the index files it decoded while they are the same
// (inode, modification time, size). Another process rewriting an index
// twice within the file system's timestamp granularity can give the new
// file the inode the first one had (freed by the rename in between, taken
// again by the next temporary) and, for a commit that replaces an entry's
// object, the same size: the reader is served what it read before, never
// the committed state. The process's Env reports the old inode for the
// rewritten file (what such a file system does) and the test sets the
// time the kernel would have given, so this holds on any file system.
TEST_F(IndexDeltas, FileRewrittenWithinTheTimestampGranularityIsReadAgain) {
  auto env = std::make_shared<testing_support::FaultEnv>();
  process::Context::Scope scope(env);
  const storage::Store s = store();
  s.update_index(kModel, kComponents, {entry("f0", std::string(32, 'a'))}, {});
  const fs::path base_file = dir / storage::names::index_file(kModel);
  ASSERT_EQ(s.index(kModel)->index.entries.at(0).graph_key, std::string(32, 'a'));  // decoded, kept
  const std::string key(32, 'b');
  ASSERT_TRUE(rewrite_in_the_same_second(*env, dir, base_file, 'b'));
  EXPECT_EQ(s.index(kModel)->index.entries.at(0).graph_key, key);
  EXPECT_EQ(s.entry(kModel + "/f0")->graph_key, key);
}

// Another process rewrites the index; this process's Env then reports the
// rewritten file with the inode, size and modification time the first one
// had: what a file system of one-second timestamps (ext3, older ext4, many
// NFS servers) that reuses the inode a rename freed gives two writes within
// a second. False when the new file has another size.
bool rewrite_in_the_same_second(testing_support::FaultEnv& env, const fs::path& dir, const fs::path& base_file,
                                char key) {
  struct stat first {};
  if (::stat(base_file.c_str(), &first) != 0) return false;
  {
    process::Context::Scope other;  // another process: its own decoded indexes, the real clock
    storage::Store::open(dir, storage::Create::no)
        .update_index(kModel, kComponents, {entry("f0", std::string(32, key))}, {});
  }
  struct stat now {};
  if (::stat(base_file.c_str(), &now) != 0 || now.st_size != first.st_size) return false;
  env.pin_inode("/" + base_file.filename().string(), first.st_ino);
  const struct timespec times[2] = {first.st_atim, first.st_mtim};
  return ::utimensat(AT_FDCWD, base_file.c_str(), times, 0) == 0;
}

// A long-running process decodes an index while it is too recent to
// trust its stat; seconds later, by its clock, the file looks settled. A
// rewrite by another process onto the same inode, size and time in
// between must not be hidden by the old decoding: neither from a read,
// nor from this process's next commit, which would write the old entries
// back over the other's.
TEST_F(IndexDeltas, ADecodingOfARecentFileIsNeverTrustedOnceItLooksSettled) {
  auto env = std::make_shared<testing_support::FaultEnv>();
  const double t0 = process::default_env()->wall_s();
  env->set_manual_clock(100.0, t0);
  process::Context::Scope scope(env);  // the long-running process, on a clock of its own
  const storage::Store s = store();
  s.update_index(kModel, kComponents, {entry("f0", std::string(32, 'a'))}, {});
  ASSERT_EQ(s.index(kModel)->index.entries.at(0).graph_key, std::string(32, 'a'));  // decoded while recent
  const fs::path base_file = dir / storage::names::index_file(kModel);
  ASSERT_TRUE(rewrite_in_the_same_second(*env, dir, base_file, 'b'));
  env->advance(10);  // the file now looks settled to this process
  EXPECT_EQ(s.index(kModel)->index.entries.at(0).graph_key, std::string(32, 'b'));
  EXPECT_EQ(s.entry(kModel + "/f0")->graph_key, std::string(32, 'b'));
}

// A commit under the model's lock reads the files it rewrites, even when a
// settled read of them is cached: a clock skewed against the file server's
// (or a file system that keeps the time of a rewrite) can give a rewritten
// file a settled file's stat.
TEST_F(IndexDeltas, ACommitNeverWritesBackAStatValidatedDecoding) {
  auto env = std::make_shared<testing_support::FaultEnv>();
  env->set_manual_clock(100.0, process::default_env()->wall_s());
  process::Context::Scope scope(env);
  const storage::Store s = store();
  s.update_index(kModel, kComponents, {entry("f0", std::string(32, 'a'))}, {});
  env->advance(10);
  ASSERT_EQ(s.index(kModel)->index.entries.at(0).graph_key, std::string(32, 'a'));  // a settled read, kept
  const fs::path base_file = dir / storage::names::index_file(kModel);
  ASSERT_TRUE(rewrite_in_the_same_second(*env, dir, base_file, 'b'));
  s.update_index(kModel, kComponents, {entry("f1", std::string(32, 'c'))}, {});
  process::Context::Scope fresh;  // judged as a fresh process would
  const storage::Store reader = storage::Store::open(dir, storage::Create::no);
  EXPECT_EQ(reader.entry(kModel + "/f0")->graph_key, std::string(32, 'b'));  // the other's commit stands
  EXPECT_EQ(reader.entry(kModel + "/f1")->graph_key, std::string(32, 'c'));
}

// A writer killed while it wrote a delta leaves its temporary in deltas/:
// verify --repair removes it once its pid is gone, as in the store's
// directory and objects/.
TEST_F(IndexDeltas, RepairRemovesATemporaryOfAKilledDeltaWriter) {
  const storage::Store s = store();
  s.update_index(kModel, kComponents, entries(0, 40), {});
  s.update_index(kModel, kComponents, {entry("x")}, {});
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const fs::path temp =
      dir / "deltas" / ("." + storage::names::delta_file(kModel, 2) + ".tmp." + std::to_string(gone) + ".0");
  std::ofstream(temp) << "half a delta";
  ASSERT_EQ(storage::names::temp_owner_any(temp.filename().string()), gone);
  Out r = sh(std::string(NPUCACHE_CLI) + " verify --repair " + dir.string());
  EXPECT_EQ(r.status, 0) << r.text;
  EXPECT_FALSE(fs::exists(temp)) << r.text;
}

// A writer in another pid namespace (a container) or on another host of an
// NFS mount has a pid that is not alive here: its temporary is kept while
// the writer holds the temporary's owner lock, and swept once it does not
// (the writer gone), by repair and by the store alike.
TEST_F(IndexDeltas, ALiveWritersTemporaryIsKeptWhateverItsPidSaysHere) {
  const storage::Store s = store();
  s.update_index(kModel, kComponents, entries(0, 40), {});
  s.update_index(kModel, kComponents, {entry("x")}, {});
  const pid_t elsewhere = ::fork();  // a pid that names no live process here
  if (elsewhere == 0) ::_exit(0);
  ::waitpid(elsewhere, nullptr, 0);
  for (const fs::path& where : {fs::path(dir), dir / "deltas"}) {
    const fs::path temp =
        where / ("." + storage::names::index_file(kModel) + ".tmp." + std::to_string(elsewhere) + ".0");
    std::ofstream(temp) << "a live writer's first bytes";
    const int owner = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);  // the writer's owner lock
    ASSERT_GE(owner, 0);
    ASSERT_EQ(::flock(owner, LOCK_EX), 0);
    Out r = sh(std::string(NPUCACHE_CLI) + " verify --repair " + dir.string());
    EXPECT_EQ(r.status, 0) << r.text;
    EXPECT_TRUE(fs::exists(temp)) << "a live writer's temporary was removed by repair: " << r.text;
    s.remove_stale_temps();
    EXPECT_TRUE(fs::exists(temp)) << "a live writer's temporary was removed by the store";
    ::close(owner);  // the writer is gone
    EXPECT_GE(s.remove_stale_temps(), 1u);
    EXPECT_FALSE(fs::exists(temp));
  }
}

}  // namespace
