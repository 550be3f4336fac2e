// What gc and verify do with what they cannot read (storage/gc.h,
// admin/admin.h): an index with a damaged record, or a damaged header,
// blocks the collection of objects (its entries may use any of them, and
// are made again from them without a compile) and eviction to fit, in
// every gc -- the dry run, --orphans, --max-size, an eviction that rewrites
// the damaged index, the size limit a save enforces -- until verify
// --repair rewrites it; a file of another cache format (a newer build's
// on a shared directory: an index, an object, a capture template) is not
// damage, and neither gc nor verify --repair removes it. Real processes
// (cache_worker, the npucache command) on a real directory.
#include <npucache/error.h>

#include "admin/admin.h"
#include "compiler/wire.h"
#include "format/envelope.h"
#include "format/names.h"
#include "process/context.h"
#include "storage/gc.h"
#include "support/cache_files.h"
#include "support/fault_env.h"
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <xxhash.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace npucache;
using testing_support::has;
using testing_support::Out;
using testing_support::sh;
using testing_support::slurp;
namespace fs = std::filesystem;

namespace {

const std::string kCli = NPUCACHE_CLI;

Out worker(const fs::path& dir, const std::string& args) {
  return sh(std::string(CACHE_WORKER) + " run " + dir.string() + " seed prompt " + args + " 2>&1");
}

void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

std::size_t files_in(const fs::path& d) {
  return fs::exists(d) ? static_cast<std::size_t>(std::distance(fs::directory_iterator(d), fs::directory_iterator()))
                       : 0;
}

// The one file of `dir` whose name holds `part` and ends in ".h5".
fs::path file_with(const fs::path& dir, const std::string& part) {
  fs::path found;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().filename().string().find(part) != std::string::npos && f.path().extension() == ".h5") {
      EXPECT_TRUE(found.empty()) << "two files hold " << part;
      found = f.path();
    }
  EXPECT_FALSE(found.empty()) << "no file holds " << part << " in " << dir;
  return found;
}

// The file sealed again (sound checksums) after `edit` changed its records:
// what another build, writing its own encoding, would have written.
void reseal(const fs::path& p, format::EnvelopeKind kind, const std::function<void(std::vector<std::string>&)>& edit) {
  const std::string bytes = slurp(p);
  const format::Opened o = format::open_envelope(kind, bytes, p.string());
  ASSERT_TRUE(o.records_intact && o.hdf5_intact) << p;
  std::vector<std::string> records = o.records;
  edit(records);
  put(p, format::seal(kind, records, std::string(o.hdf5), o.userblock));
}

// The file's header as an envelope version 2 would write it (its header
// checksum sound).
void bump_envelope_version(const fs::path& p) {
  std::string bytes = slurp(p);
  ASSERT_GT(bytes.size(), 56u);
  const uint32_t version = 2;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  const uint64_t sum = XXH3_64bits(bytes.data(), 48);
  std::memcpy(bytes.data() + 48, &sum, sizeof sum);
  put(p, bytes);
}

class UnreadIndexes : public testing_support::TempDirTest {
 protected:
  UnreadIndexes() : TempDirTest("unread") {}
  fs::path objects() const { return dir / storage::names::kObjectsDir; }
  Out cli(const std::string& args, const fs::path& d) const {
    return sh(kCli + " " + args + " " + d.string() + " 2>&1");
  }
};

}  // namespace

// Three entries (a dynamic one, two static ones), three objects; the last
// record of the static index (its world2 entry, whose object no other entry
// uses) fails its checksum.
TEST_F(UnreadIndexes, AnIndexWithADamagedRecordLetsNoGcCollectOrEvictToFit) {
  ASSERT_EQ(worker(dir, "").status, 0);
  ASSERT_EQ(worker(dir, "--static").status, 0);
  ASSERT_EQ(worker(dir, "--static --world 2 --rank 1 --scale 3").status, 0);
  ASSERT_EQ(files_in(objects()), 3u);
  const fs::path index = file_with(dir, "_static_");
  {
    std::string bytes = slurp(index);
    uint64_t records = 0;
    std::memcpy(&records, bytes.data() + 16, sizeof records);
    ASSERT_LT(56 + records, bytes.size());
    bytes[56 + records - 1] ^= 0x5a;
    put(index, bytes);
  }
  ASSERT_EQ(testing_support::entries(dir.string()).size(), 2u);

  const Out st = cli("stats", dir);
  EXPECT_TRUE(has(st.text, "gc keeps them")) << st.text;
  for (const std::string cmd :
       {"gc --orphans --dry-run", "gc --max-size 1 --dry-run", "gc --orphans", "gc --max-size 1"}) {
    const Out o = cli(cmd, dir);
    EXPECT_EQ(o.status, 1) << "gc did not do as asked: " << cmd << ": " << o.text;
    EXPECT_TRUE(has(o.text, "not read whole")) << cmd << ": " << o.text;
    for (const char* removal : {"would remove /", "would evict Model", "removed /", "evicted Model"})
      EXPECT_FALSE(has(o.text, removal)) << cmd << ": " << o.text;
    EXPECT_EQ(files_in(objects()), 3u) << cmd << " collected an object an unread entry may use: " << o.text;
    EXPECT_EQ(testing_support::entries(dir.string()).size(), 2u) << cmd << " evicted to fit: " << o.text;
  }

  // The limit a save enforces: said, nothing of it removed; said once per
  // process (here, two saves' enforcement in this one).
  const Out set = cli("config max-size 1 --cache-dir", dir);
  EXPECT_EQ(set.status, 1) << "the limit, set, could not be applied: " << set.text;
  EXPECT_TRUE(has(set.text, "max-size 1 B for")) << set.text;
  const Out saved = worker(dir, "--other");
  ASSERT_EQ(saved.status, 0) << saved.text;
  EXPECT_EQ(occurrences(saved.text, "is not enforced"), 1u) << saved.text;
  testing::internal::CaptureStderr();
  storage::enforce_limit(dir.string(), {});
  storage::enforce_limit(dir.string(), {});
  const std::string warned = testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(warned, "is not enforced"), 1u) << warned;
  EXPECT_EQ(files_in(objects()), 4u) << saved.text;
  EXPECT_EQ(testing_support::entries(dir.string()).size(), 3u) << saved.text;
  ASSERT_EQ(cli("config max-size none --cache-dir", dir).status, 0);

  // An eviction asked for: the other indexes' entries go, the damaged
  // index is not rewritten (that would drop its damaged record), and no
  // object is collected, in this gc or the next.
  const fs::path copy = base / "copy";
  fs::copy(dir, copy, fs::copy_options::recursive);
  const std::string damaged_bytes = slurp(copy / index.filename());
  const Out evicted = cli("gc --older-than 0s", copy);
  EXPECT_EQ(evicted.status, 1) << evicted.text;
  EXPECT_TRUE(has(evicted.text, "not read whole")) << evicted.text;
  EXPECT_TRUE(has(evicted.text, "is evicted: it is not read whole")) << evicted.text;
  EXPECT_EQ(testing_support::entries(copy.string()).size(), 1u) << evicted.text;
  EXPECT_EQ(slurp(copy / index.filename()), damaged_bytes) << evicted.text;
  const Out next = cli("gc --orphans", copy);
  EXPECT_EQ(next.status, 1) << next.text;
  EXPECT_EQ(files_in(copy / storage::names::kObjectsDir), 4u) << next.text;

  // verify --repair rewrites the index; gc then collects the object only
  // the damaged record used.
  const Out repaired = cli("verify --repair", dir);
  EXPECT_TRUE(has(repaired.text, "rewrote index")) << repaired.text;
  const Out g = cli("gc --orphans", dir);
  EXPECT_EQ(g.status, 0) << g.text;
  EXPECT_FALSE(has(g.text, "not read whole")) << g.text;
  EXPECT_EQ(files_in(objects()), 3u) << g.text;
}

// An index whose header is damaged (its magic intact) holds entries no one
// can read: gc collects nothing. A file that only shares an index's name
// (no magic) holds none: gc collects as usual.
TEST_F(UnreadIndexes, ADamagedHeaderBlocksCollectionAForeignFileUnderAnIndexNameDoesNot) {
  ASSERT_EQ(worker(dir, "").status, 0);
  ASSERT_EQ(worker(dir, "--static").status, 0);
  const fs::path index = file_with(dir, "_static_");
  std::string bytes = slurp(index);
  bytes[20] ^= 0x01;  // the record bytes' size: the header fails its checksum
  put(index, bytes);
  Out o = cli("gc --orphans", dir);
  EXPECT_EQ(o.status, 1) << o.text;
  EXPECT_TRUE(has(o.text, "not read whole")) << o.text;
  EXPECT_EQ(files_in(objects()), 2u) << o.text;
  // Nothing of it can be read: verify --repair removes it, then gc collects.
  const fs::path copy = base / "copy";
  fs::copy(dir, copy, fs::copy_options::recursive);
  const Out repaired = cli("verify --repair", copy);
  EXPECT_TRUE(has(repaired.text, "removed unreadable index")) << repaired.text;
  o = cli("gc --orphans", copy);
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(files_in(copy / storage::names::kObjectsDir), 1u) << o.text;

  put(index, "not an index, only named like one\n");
  o = cli("gc --orphans", dir);
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_FALSE(has(o.text, "not read whole")) << o.text;
  EXPECT_EQ(files_in(objects()), 1u) << "the static entry's object is an orphan: " << o.text;
  EXPECT_TRUE(fs::exists(index)) << "gc removes no file it does not know";
}

// A later build's files beside this one's: its index (a model record of a
// later encoding), its object (an object record of a later encoding), its
// capture template and tuning table (envelope version 2), all sealed
// soundly. verify lists them and reports no problem; verify --repair and gc
// remove none of them, export leaves the index out, a save leaves the
// tuning table as it is.
TEST_F(UnreadIndexes, FilesOfALaterFormatAreLeftByVerifyRepairGcExportAndSaves) {
  ASSERT_EQ(worker(dir, "").status, 0);
  ASSERT_EQ(worker(dir, "--static").status, 0);
  ASSERT_EQ(worker(dir, "--reduce-overhead").status, 0);
  const fs::path templates = dir / storage::names::kTemplatesDir;
  ASSERT_EQ(files_in(templates), 1u);
  ASSERT_EQ(files_in(objects()), 3u);
  const fs::path index = file_with(dir, "_static_");
  const auto static_entry = [&] {
    for (const auto& e : testing_support::entries(dir.string()))
      if (has(e.path, "_static_")) return e;
    ADD_FAILURE() << "no static entry";
    return storage::EntryRecord{};
  }();
  const fs::path object = objects() / storage::names::object_file(static_entry.graph_key);
  const fs::path tmpl = fs::directory_iterator(templates)->path();
  reseal(index, format::EnvelopeKind::index, [](std::vector<std::string>& r) { r[0][1] = char(r[0][1] + 1); });
  reseal(object, format::EnvelopeKind::object, [](std::vector<std::string>& r) { r[0][1] = char(r[0][1] + 1); });
  reseal(tmpl, format::EnvelopeKind::capture_template, [](std::vector<std::string>& r) {
    compiler::ByteReader in(r[0], "template record");
    compiler::ByteWriter out;
    out.str(in.str());  // graph key
    out.str(in.str());  // binding
    out.str(in.str());  // runtime version
    (void)in.str();     // format version: a later one
    out.str("12.0.0");
    out.bytes(in.bytes(in.remaining()));
    r[0] = out.take();
  });
  const fs::path tuning = dir / storage::names::kTuningFile;
  bump_envelope_version(tuning);
  const std::string index_bytes = slurp(index), object_bytes = slurp(object), tmpl_bytes = slurp(tmpl),
                    tuning_bytes = slurp(tuning);

  const Out v = cli("verify", dir);
  EXPECT_EQ(v.status, 0) << "another format's files are not damage: " << v.text;
  EXPECT_FALSE(has(v.text, "BAD")) << v.text;
  for (const fs::path& p : {index, object, tmpl})
    EXPECT_TRUE(has(v.text, "left " + p.string() + ": ")) << p << ": " << v.text;
  EXPECT_TRUE(has(v.text, "another npucache cache format")) << v.text;

  const std::size_t entries_here = testing_support::entries(dir.string()).size();
  for (const std::string cmd : {"verify --repair", "gc --orphans", "gc --max-size 1"}) {
    const Out o = cli(cmd, dir);
    EXPECT_EQ(o.status, has(cmd, "gc") ? 1 : 0) << cmd << ": " << o.text;
    EXPECT_EQ(testing_support::entries(dir.string()).size(), entries_here) << cmd << ": " << o.text;
    EXPECT_EQ(slurp(index), index_bytes) << cmd << ": " << o.text;
    EXPECT_EQ(slurp(object), object_bytes) << cmd << ": " << o.text;
    EXPECT_EQ(slurp(tmpl), tmpl_bytes) << cmd << ": " << o.text;
  }
  const Out g = cli("gc --orphans", dir);
  EXPECT_TRUE(has(g.text, "a later npucache")) << g.text;

  const Out exported =
      sh(kCli + " export --output " + (base / "b.npuc").string() + " --cache-dir " + dir.string() + " 2>&1");
  EXPECT_EQ(exported.status, 0) << exported.text;
  EXPECT_TRUE(has(exported.text, "exported 2 entries")) << exported.text;
  const Out saved = worker(dir, "--other");
  ASSERT_EQ(saved.status, 0) << saved.text;
  EXPECT_TRUE(has(saved.text, "left as it is")) << saved.text;
  EXPECT_EQ(slurp(tuning), tuning_bytes) << "a save rewrote a later format's tuning table: " << saved.text;

  // The other build's index gone (elsewhere, or its build's own gc): its
  // object, no longer named by any index here, is still another format's.
  fs::remove(index);
  const Out o = cli("gc --orphans", dir);
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(has(o.text, "left " + object.string() + " (of another cache format)")) << o.text;
  EXPECT_EQ(slurp(object), object_bytes) << o.text;
  EXPECT_EQ(slurp(tmpl), tmpl_bytes) << o.text;
  EXPECT_EQ(files_in(objects()), 4u) << o.text;
  const Out st = cli("stats", dir);
  EXPECT_TRUE(has(st.text, "later format     1 object(s)")) << st.text;
  EXPECT_TRUE(has(st.text, "orphans          0 object(s)")) << st.text;
}

// A later format's object under a key this format's entry names was made by
// hand (keys hash the format version): verify reports it, verify --repair
// removes it with its entry, and the next run compiles.
TEST_F(UnreadIndexes, ALaterFormatsObjectUnderThisFormatsKeyIsDamage) {
  ASSERT_EQ(worker(dir, "").status, 0);
  const auto all = testing_support::entries(dir.string());
  ASSERT_EQ(all.size(), 1u);
  const fs::path object = objects() / storage::names::object_file(all[0].graph_key);
  reseal(object, format::EnvelopeKind::object, [](std::vector<std::string>& r) { r[0][1] = char(r[0][1] + 1); });
  const Out v = cli("verify", dir);
  EXPECT_EQ(v.status, 1) << v.text;
  EXPECT_TRUE(has(v.text, "BAD  " + object.string())) << v.text;
  const Out r = cli("verify --repair", dir);
  EXPECT_TRUE(has(r.text, "removed damaged object " + object.string())) << r.text;
  EXPECT_FALSE(fs::exists(object));
  const Out again = worker(dir, "");
  EXPECT_TRUE(has(again.text, "status compiled")) << again.text;
}

// Which format versions are later than this build's: X.Y.Z compared by
// number, anything else (a suffix, another shape) not.
TEST(LaterFormat, ComparesVersionsByNumber) {
  for (const char* later : {"11.0.1", "11.1.0", "12.0.0", "100.0.0"})
    EXPECT_TRUE(format::names::later_format(later)) << later << " (and this build's version parses)";
  for (const char* not_later : {"11.0.0", "10.0.0", "9.99.99", "", "12.0", "12.0.0-rc1", "11.0.0.1", "x.y.z", "-12.0.0",
                                "12..0", "1234567890.0.0"})
    EXPECT_FALSE(format::names::later_format(not_later)) << not_later;
}

// Files of earlier formats stay this build's to judge: the compiled regions
// of a 9.0.0 cache are not a later build's, and a size limit removes them.
TEST_F(UnreadIndexes, RegionsOfAnEarlierFormatAreSizedOut) {
  fs::copy(fs::path(FIXTURES) / "format-9.0.0" / "mpi-tp1-pp2", dir, fs::copy_options::recursive);
  const fs::path regions = dir / storage::names::kRegionsDir;
  ASSERT_GT(files_in(regions), 0u);
  const Out v = cli("verify", dir);
  EXPECT_FALSE(has(v.text, "another npucache cache format")) << v.text;
  const Out g = cli("gc --max-size 1", dir);
  EXPECT_EQ(g.status, 0) << g.text;
  EXPECT_EQ(files_in(regions), 0u) << g.text;
}

// A read that fails (EIO) is not damage: verify reports the file it could
// not read and `verify --repair` removes nothing of it -- an index whose
// read fails, an object whose read fails (and the entries naming it) --
// where it used to remove the index ("unreadable") or the object and its
// entries. Once the storage answers, the cache is whole and serves.
TEST_F(UnreadIndexes, AReadErrorIsReportedNeverRepaired) {
  ASSERT_EQ(worker(dir, "").status, 0);
  ASSERT_EQ(worker(dir, "--static").status, 0);
  ASSERT_EQ(files_in(objects()), 2u);
  const auto before = testing_support::entries(dir.string());
  ASSERT_EQ(before.size(), 2u);
  std::map<fs::path, std::string> files;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.is_regular_file() && f.path().extension() == ".h5" && !has(f.path().string(), "/locks/"))
      files[f.path()] = slurp(f.path());
  const fs::path index = file_with(dir, "_static_");
  for (const std::string& failing : {index.filename().string(), std::string("/objects/")}) {
    SCOPED_TRACE("reads failing: " + failing);
    auto env = std::make_shared<testing_support::FaultEnv>();
    cache::admin::VerifyResult v;
    {
      process::Context::Scope scope(env);
      testing_support::Fault f = testing_support::Fault::fail(testing_support::FileOp::read, 1, EIO, failing);
      f.times = 0;  // every read of it, in the check and in the repair
      env->arm(f);
      ASSERT_NO_THROW(v = cache::admin::verify(dir.string(), true, 5.0));
    }
    ASSERT_FALSE(env->faulted().empty()) << "no read failed";
    std::string bad;
    for (const auto& [what, why] : v.bad) bad += what + ": " + why + "\n";
    EXPECT_TRUE(has(bad, "could not be read")) << bad;
    EXPECT_TRUE(has(bad, "Input/output error")) << bad;
    for (const auto& r : v.repaired) EXPECT_TRUE(has(r, "temporary")) << "repaired on a failed read: " << r;
    for (const auto& [p, bytes] : files) {
      ASSERT_TRUE(fs::exists(p)) << p << " was removed";
      EXPECT_EQ(slurp(p), bytes) << p << " was rewritten";
    }
  }
  const Out verify = cli("verify", dir);
  EXPECT_EQ(verify.status, 0) << verify.text;
  EXPECT_TRUE(has(worker(dir, "--static").text, "compiled 0"));
  EXPECT_EQ(testing_support::entries(dir.string()).size(), 2u);
}
