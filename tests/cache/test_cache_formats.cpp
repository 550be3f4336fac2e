// Caches of every earlier format, checked in under tests/fixtures/: each
// entry is reported stale with its version and rebuilt, never served, on
// the default hit check and the code_version fast path; a bundle of an
// earlier format is refused naming its format.
#include "cache/cache_test.h"
#include "format/names.h"
#include "storage/store.h"
#include "support/process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace npucache;
namespace fs = std::filesystem;
using testing_support::has;
using testing_support::Out;
using testing_support::sh;

namespace {

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs each case of `cases` on a fresh copy of the cache of an earlier
// format in tests/fixtures/format-<version>/single: every entry is reported
// stale with the version (through the nearest entry of the same method: the
// format version moves model_info) and rebuilt, never served; the files of
// the earlier format are never rewritten; the rebuilt entries then serve.
void expect_stale_and_rebuilt(const fs::path& dir, const std::string& version, const std::vector<std::string>& cases) {
  const fs::path fixture = fs::path(FIXTURES) / ("format-" + version) / "single";
  int n = 0;
  for (const std::string& args : cases) {
    const fs::path d = dir / std::to_string(n++);  // a fresh copy of the old cache for each case
    fs::create_directories(dir);
    fs::copy(fixture, d, fs::copy_options::recursive);
    for (const auto& f : fs::recursive_directory_iterator(dir))
      fs::permissions(f.path(), fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove);
    fs::permissions(dir, fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove);
    Out o = sh(worker(d.string(), args));
    ASSERT_EQ(o.status, 0) << args << ": " << o.text;
    EXPECT_FALSE(has(o.text, "status hit\nreason \n")) << args << ": an old entry was served\n" << o.text;
    EXPECT_TRUE(has(o.text, "compiled 1\nstatus compiled\nreason stale (entry ")) << args << ": " << o.text;
    EXPECT_TRUE(has(o.text, "is of another version; format_version: stored '" + version + "', now '" +
                                storage::names::kFormatVersion + "'"))
        << args << ": " << o.text;
    EXPECT_TRUE(has(o.text, "result 4 8 12")) << args << ": " << o.text;
    for (const auto& f : fs::recursive_directory_iterator(fixture)) {
      if (!f.is_regular_file() || f.path().extension() != ".h5") continue;
      const fs::path copy = d / fs::relative(f.path(), fixture);
      EXPECT_EQ(contents(copy), contents(f.path()))
          << args << ": " << copy << " of format " << version << " was rewritten";
    }
    Out again = sh(worker(d.string(), args));
    EXPECT_TRUE(has(again.text, "compiled 0\nstatus hit\nreason \n")) << args << ": " << again.text;
  }
}

}  // namespace

// The caches of the previous formats (10.0.0, 9.0.0, 8.0.0 and 7.0.0, checked in by
// tests/fixtures/format-*/README.md's commands), on the default hit check
// and on the code_version fast path, for an entry written by either.
TEST_F(CacheTest, PreviousFormatIsReportedStaleAndRebuilt) {
  for (const std::string version : {"10.0.0", "9.0.0", "8.0.0", "7.0.0"})
    expect_stale_and_rebuilt(
        dir / version, version,
        {"prompt --code-version v1", "prompt --code-version v1 --fast", "decode --code-version v1 --fast",
         "decode --code-version v1", "prompt --reduce-overhead --code-version v1",
         "prompt --world 2 --rank 1 --code-version v1", "prompt --static --code-version v1"});
}

// A bundle of the previous formats (tests/fixtures/format-10.0.0/, 9.0.0/, 8.0.0/
// and 7.0.0/ single.npuc, a bundle version this build reads) is refused
// whole, naming the format: its programs are of another encoding, never
// imported, misread or served; the cache stays empty and the method
// compiles, then serves.
TEST_F(CacheTest, PreviousFormatBundleIsRefusedNamingItsFormat) {
  for (const std::string version : {"10.0.0", "9.0.0", "8.0.0", "7.0.0"}) {
    const fs::path bundle = fs::path(FIXTURES) / ("format-" + version) / "single.npuc";
    const fs::path d = dir / ("imported-" + version);
    Out imp = sh(std::string(NPUCACHE_CLI) + " import " + bundle.string() + " " + d.string());
    ASSERT_NE(imp.status, 0) << imp.text;
    EXPECT_TRUE(has(imp.text, "nothing imported")) << imp.text;
    EXPECT_TRUE(has(imp.text, "written by cache format " + version + " (this build reads and writes " +
                                  std::string(storage::names::kFormatVersion) + ")"))
        << imp.text;
    for (const std::string args : {"prompt --code-version v1"}) {
      Out o = sh(worker(d.string(), args));
      ASSERT_EQ(o.status, 0) << args << ": " << o.text;
      EXPECT_TRUE(has(o.text, "compiled 1\nstatus compiled\n")) << args << ": " << o.text;
      EXPECT_TRUE(has(o.text, "result 4 8 12")) << args << ": " << o.text;
      Out again = sh(worker(d.string(), args));
      EXPECT_TRUE(has(again.text, "compiled 0\nstatus hit\nreason \n")) << args << ": " << again.text;
    }
  }
}

// Format 6.0.0 (tests/fixtures/format-6.0.0), likewise.
TEST_F(CacheTest, Format6IsReportedStaleAndRebuilt) {
  expect_stale_and_rebuilt(
      dir, "6.0.0",
      {"prompt --code-version v1", "prompt --code-version v1 --fast", "decode --code-version v1 --fast",
       "decode --code-version v1", "prompt --reduce-overhead --code-version v1",
       "prompt --world 2 --rank 1 --code-version v1", "prompt --static --code-version v1"});
}

// Format 5.0.0 (tests/fixtures/format-5.0.0), likewise.
TEST_F(CacheTest, Format5IsReportedStaleAndRebuilt) {
  expect_stale_and_rebuilt(
      dir, "5.0.0",
      {"prompt --code-version v1", "prompt --code-version v1 --fast", "decode --code-version v1 --fast",
       "decode --code-version v1", "prompt --reduce-overhead --code-version v1",
       "prompt --world 2 --rank 1 --code-version v1", "prompt --static --code-version v1"});
}

// Format 4.0.0 (tests/fixtures/format-4.0.0), likewise.
TEST_F(CacheTest, Format4IsReportedStaleAndRebuilt) {
  expect_stale_and_rebuilt(
      dir, "4.0.0",
      {"prompt --code-version v1", "prompt --code-version v1 --fast", "decode --code-version v1 --fast",
       "decode --code-version v1", "prompt --reduce-overhead --code-version v1",
       "prompt --world 2 --rank 1 --code-version v1", "prompt --static --code-version v1"});
}

// Format 3.0.0 (tests/fixtures/format-3.0.0), likewise.
TEST_F(CacheTest, Format3IsReportedStaleAndRebuilt) {
  expect_stale_and_rebuilt(
      dir, "3.0.0",
      {"prompt --code-version v1", "prompt --code-version v1 --fast", "decode --code-version v1 --fast",
       "decode --code-version v1", "prompt --reduce-overhead --code-version v1",
       "prompt --world 2 --rank 1 --code-version v1", "prompt --static --code-version v1"});
}

// Format 2.0.0 (tests/fixtures/format-2.0.0), likewise.
TEST_F(CacheTest, Format2IsReportedStaleAndRebuilt) {
  expect_stale_and_rebuilt(dir, "2.0.0",
                           {"prompt --code-version v1 --fast", "prompt --code-version v1",
                            "prompt --ge-cache --code-version v1", "prompt --reduce-overhead --code-version v1",
                            "prompt --world 2 --rank 1 --code-version v1", "prompt --static --code-version v1"});
}
