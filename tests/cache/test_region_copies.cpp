// Regions copied into a store from the objects that come into it from
// elsewhere (cache/region_copies.h): an imported cache holds the regions
// its objects hold, exactly as the compiles that made them stored them, so
// a model of another depth on it compiles none; what is not this build's
// to copy (custom decompositions, another format) is never copied, and a
// planted file under a region's name is never served.
#include <gtest/gtest.h>

#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/ir/hash.h>
#include <npucache/ops.h>

#include "admin/admin.h"
#include "admin/remote_admin.h"
#include "cache/region_copies.h"
#include "cache/runnable.h"
#include "compiler/link_program.h"
#include "compiler/region_stack.h"
#include "compiler/serialize.h"
#include "format/bundle.h"
#include "format/keys.h"
#include "format/names.h"
#include "process/context.h"
#include "remote/config.h"
#include "remote/signing.h"
#include "storage/commit_queue.h"
#include "storage/regions.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "support/cache_files.h"
#include "support/redis_server.h"
#include "support/region_counts.h"
#include "support/temp_dir_test.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>

namespace npucache {
namespace {

namespace fs = std::filesystem;
using region_stack::Stack;

class RegionCopies : public testing_support::TempDirTest {
 protected:
  // Region hits and compiles of this process since the last call.
  // {hits, compiles} of regions since the last call (or the test's start).
  std::pair<uint64_t, uint64_t> region_counts() { return counts_.take(); }
  void SetUp() override {
    TempDirTest::SetUp();
    (void)counts_.take();
  }
  static CacheOptions options(const fs::path& cache, const std::string& mode, bool ge_cache = false) {
    CacheOptions o;
    o.cache_dir = cache.string();
    o.compile.mode = mode;
    o.compile.fullgraph = true;
    o.ge_cache = ge_cache;
    return o;
  }
  // A model of `depth` narrow and `wide` wide blocks cached in `o`'s
  // directory, run against eager.
  static void run_checked(int depth, int wide, const CacheOptions& o, float seed) {
    Stack m(depth, wide, 8);
    for (auto& [name, t] : m.named_parameters()) {
      std::vector<float> v = t.to_vector();
      v[0] += seed;
      t.copy_from(v);
    }
    auto f = cache_compile(m, &Stack::forward, o);
    region_stack::expect_as_eager(f, m);
  }
  // The regions of `cache` by key, checked intact.
  static std::map<std::string, format::RegionRecord> region_files(const fs::path& cache) {
    std::map<std::string, format::RegionRecord> out;
    const storage::Store s = storage::Store::open(cache, storage::Create::no);
    for (const auto& r : storage::stored_regions(s, true)) {
      EXPECT_EQ(r.damage, "") << r.path;
      if (auto rec = storage::read_region(s, r.key)) out.emplace(r.key, std::move(*rec));
    }
    return out;
  }
  // Whether `copied` holds the regions `compiled` holds, each the same
  // region as stored but for the names of its symbols (each file names
  // them as the trace it came from did; a read renames them).
  static void expect_same_regions(const std::map<std::string, format::RegionRecord>& copied,
                                  const std::map<std::string, format::RegionRecord>& compiled) {
    ASSERT_EQ(copied.size(), compiled.size());
    for (const auto& [key, c] : compiled) {
      SCOPED_TRACE(key);
      ASSERT_TRUE(copied.count(key));
      const format::RegionRecord& b = copied.at(key);
      EXPECT_EQ(b.validity, c.validity);
      compiler::RegionArtifact renamed{
          c.artifact.key, b.artifact.body, c.artifact.config,
          compiler::renamed_region(c.artifact.compiled, canonical_symbols(c.artifact.body), b.artifact.body)};
      EXPECT_EQ(compiler::serialize_region(b.artifact), compiler::serialize_region(renamed));
    }
  }

 private:
  testing_support::RegionCounts counts_;
};

// Archived objects (default), objects holding their program (max-autotune
// with ge_cache) and captured ones (reduce-overhead): the import writes
// each region the compiles stored, byte for byte, and a model of another
// depth on the imported cache takes them all and compiles none.
TEST_F(RegionCopies, AnImportedCacheBringsTheRegionsItsObjectsHold) {
  for (const auto& [mode, ge_cache] : std::vector<std::pair<std::string, bool>>{
           {"default", false}, {"max-autotune", true}, {"max-autotune", false}, {"reduce-overhead", false}}) {
    SCOPED_TRACE(mode + (ge_cache ? " with ge_cache" : ""));
    const fs::path a = dir / (mode + std::to_string(ge_cache) + "-a"),
                   b = dir / (mode + std::to_string(ge_cache) + "-b");
    run_checked(4, 1, options(a, mode, ge_cache), 0.0f);
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{2}));
    const auto compiled = region_files(a);
    ASSERT_EQ(compiled.size(), 2u);
    const std::string bundle = (dir / "a.npuc").string();
    (void)cache::admin::export_bundle(a.string(), bundle);
    const cache::admin::Transfer t = cache::admin::import_bundle(bundle, b.string());
    EXPECT_EQ(t.regions, 2u);
    expect_same_regions(region_files(b), compiled);
    // Imported again: every region is there, nothing written.
    EXPECT_EQ(cache::admin::import_bundle(bundle, b.string()).regions, 0u);
    run_checked(2, 1, options(b, mode, ge_cache), 0.25f);
    EXPECT_EQ(region_counts(), std::make_pair(uint64_t{2}, uint64_t{0})) << "another depth compiles no region";
  }
}

// A file planted under a region's name before the import is left (the
// copy only stats), and the compile that reads it finds it is not the
// region its name says: reported, compiled again, results equal eager.
TEST_F(RegionCopies, APlantedFileUnderARegionsNameIsNeverServed) {
  const fs::path a = dir / "a", b = dir / "b";
  run_checked(3, 1, options(a, "default"), 0.0f);
  (void)region_counts();
  const auto compiled = region_files(a);
  ASSERT_EQ(compiled.size(), 2u);
  const std::string planted = compiled.begin()->first;
  fs::create_directories(b / format::names::kRegionsDir);
  // Another region's valid file, renamed to the first's key.
  fs::copy_file(a / format::names::kRegionsDir / format::names::region_file(std::next(compiled.begin())->first),
                b / format::names::kRegionsDir / format::names::region_file(planted));
  const std::string bundle = (dir / "a.npuc").string();
  (void)cache::admin::export_bundle(a.string(), bundle);
  EXPECT_EQ(cache::admin::import_bundle(bundle, b.string()).regions, 1u);
  run_checked(2, 1, options(b, "default"), 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{1}, uint64_t{1})) << "the planted one is compiled again";
  expect_same_regions(region_files(b), compiled);
}

// An entry's settings are its writer's claim: an entry that says
// "default" for an object compiled with a custom decomposition (edited in
// the bundle) would plant the custom program for every default compile of
// the body. The object's own trace refutes the claim, so nothing is
// copied, and a default compile there compiles the body: equal to eager.
TEST_F(RegionCopies, AnImportedEntryWhoseSettingsAreNotItsObjectsCopiesNothing) {
  const fs::path a = dir / "a", b = dir / "b";
  CacheOptions custom = options(a, "default");
  custom.compile.custom_decompositions[Op::tanh] = {
      "test.zero", [](const std::vector<Tensor>& in, const Attrs&) { return in[0] * 0.0f; }};
  {
    Stack m(3, 0, 8);
    auto f = cache_compile(m, &Stack::forward, custom);
    region_stack::Inputs in = region_stack::inputs(m, 2, 3, 8);
    (void)f(in.x, in.positions, in.caches);
  }
  auto bundle = cache::admin::read_cache(a.string());
  ASSERT_EQ(bundle.entries.size(), 1u);
  ASSERT_NE(bundle.entries[0].meta.components.at(format::component::kDecompositions), "default");
  bundle.entries[0].meta.components[format::component::kDecompositions] = "default";
  EXPECT_EQ(cache::admin::import_records(std::move(bundle), b.string()).regions, 0u);
  EXPECT_TRUE(region_files(b).empty());
  (void)region_counts();
  run_checked(2, 0, options(b, "default"), 0.5f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{1})) << "compiled, never the custom program";
}

// What is not this build's to copy: regions of custom decompositions (a
// region file records its body's hash after decomposition, and a table is
// known here by name alone), entries of another format, unknown settings.
TEST_F(RegionCopies, OnlyRegionsThisBuildWouldStoreAreCopied) {
  const fs::path a = dir / "a";
  Stack m(3, 1, 8);
  auto f = cache_compile(m, &Stack::forward, options(a, "max-autotune", true));
  region_stack::expect_as_eager(f, m);
  const storage::Store s = storage::Store::open(a, storage::Create::no);
  const auto bundle = cache::admin::read_cache(a.string());
  ASSERT_EQ(bundle.entries.size(), 1u);
  const format::Components& c = bundle.entries[0].meta.components;
  const auto v = cache::region_validity_of(c);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->format_version, format::names::kFormatVersion);
  const cache::Decoded d = cache::decode(bundle.objects.at(0), bundle.entries[0].parameters);
  ASSERT_EQ(d.graph->regions.size(), 2u);
  for (const auto& r : storage::stored_regions(s, false)) fs::remove(r.path);
  format::RegionValidity custom = *v;
  custom.decompositions = "tanh:test.tanh";
  EXPECT_EQ(cache::copy_regions(s, *d.graph, custom), 0);
  EXPECT_TRUE(storage::stored_regions(s, false).empty());
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{format::component::kFormatVersion, "9.0.0"},
                                                        {format::component::kDynamic, "sometimes"},
                                                        {format::component::kRuntimeVersion, ""}}) {
    format::Components other = c;
    if (value.empty())
      other.erase(name);
    else
      other[name] = value;
    EXPECT_FALSE(cache::region_validity_of(other).has_value()) << name << "=" << value;
  }
  EXPECT_EQ(cache::copy_regions(s, *d.graph, *v), 2);
  EXPECT_EQ(cache::copy_regions(s, *d.graph, *v), 0) << "each region once";
}

// The remote tier: a program served by a signed remote (its values a
// trusted key's) is trusted as a compile of the store is, so its regions
// are copied with it into the serving host's store; an unsigned remote's
// program is a claim anyone who can write the remote makes, so its regions
// are never copied (the host's own compiles store their own).
TEST_F(RegionCopies, ASignedRemoteBringsItsRegionsAnUnsignedOneDoesNot) {
  testing_support::RedisServer server;
  const remote::signing::PublicKey pub = remote::signing::write_key_files((base / "keys").string());
  const std::string trusted = (base / "trusted.pub").string();
  std::ofstream(trusted) << pub.text() << "  ci\n";
  const auto with_remote = [&](const fs::path& cache, const std::string& signing_key, const std::string& keys) {
    CacheOptions o = options(cache, "max-autotune", true);
    o.remote.url = server.url();
    o.remote.signing_key_file = signing_key;
    o.remote.trusted_keys_file = keys;
    return o;
  };
  const fs::path ci = dir / "ci", signed_host = dir / "signed", plain_host = dir / "plain";
  run_checked(4, 1, with_remote(ci, (base / "keys" / "signing.key").string(), ""), 0.0f);
  storage::wait_for_commits();
  const auto compiled = region_files(ci);
  ASSERT_EQ(compiled.size(), 2u);
  (void)region_counts();
  // The same model on a host trusting the key: served by the remote, no
  // compile; the background commit brings the regions.
  run_checked(4, 1, with_remote(signed_host, "", trusted), 0.0f);
  storage::wait_for_commits();
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{0})) << "served by the remote";
  expect_same_regions(region_files(signed_host), compiled);
  // Counted where they were written (stats.json, `npucache stats`, metrics).
  storage::flush_stats();
  EXPECT_EQ(storage::read_stats(signed_host).region_copies, 2u);
  run_checked(2, 1, options(signed_host, "max-autotune", true), 0.25f);
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{2}, uint64_t{0})) << "another depth on the host compiles none";
  // `remote pull`: of a signed remote, the regions come with the objects;
  // of the same remote read unsigned, they do not.
  remote::Config pull = remote::parse_url(server.url());
  EXPECT_EQ(cache::admin::remote_pull(pull, "Stack", (dir / "pulled-plain").string()).regions, 0u);
  pull.trusted_keys_file = trusted;
  const auto pulled = cache::admin::remote_pull(pull, "Stack", (dir / "pulled-signed").string());
  EXPECT_EQ(pulled.entries, 1u);
  EXPECT_EQ(pulled.regions, 2u);
  expect_same_regions(region_files(dir / "pulled-signed"), compiled);
  // Read without trusted keys: served, committed, no region copied.
  run_checked(4, 1, with_remote(plain_host, "", ""), 0.0f);
  storage::wait_for_commits();
  EXPECT_EQ(region_counts(), std::make_pair(uint64_t{0}, uint64_t{0})) << "served by the remote";
  EXPECT_TRUE(region_files(plain_host).empty()) << "an unsigned remote's regions are not copied";
  // Nor by an export of the host's store, which holds the program but not
  // its regions: the bundle vouches for none of them.
  const std::string plain_bundle = (dir / "plain.npuc").string();
  EXPECT_EQ(cache::admin::read_cache(plain_host.string()).unvouched.size(), 1u);
  (void)cache::admin::export_bundle(plain_host.string(), plain_bundle);
  const auto imported = cache::admin::import_bundle(plain_bundle, (dir / "plain-imported").string());
  EXPECT_EQ(imported.entries, 1u);
  EXPECT_EQ(imported.regions, 0u) << "an unsigned remote's regions spread through an export";
  storage::flush_stats();
  EXPECT_EQ(storage::read_stats(dir / "pulled-signed").region_copies, 2u);
  EXPECT_EQ(storage::read_stats(dir / "pulled-plain").region_copies, 0u);
  EXPECT_EQ(storage::read_stats(plain_host).region_copies, 0u);
  EXPECT_EQ(storage::read_stats(ci).region_copies, 0u) << "its own compiles are not copies";
}

// A bundle names the objects whose regions its store does not vouch for:
// those whose every region the store's regions/ does not hold as the
// object's program has it (bundle version 8); an import copies the regions
// of every other object. A store of several depths vouches for each (their
// programs took the regions renamed); a region file edited to another
// program, removed, or refused vouches for nothing (and an export reading
// them marks none used); a bundle naming an object it lacks is refused; a
// bundle of an earlier version names none and copies as before.
// save_cache_artifacts vouches through the directory each object came
// from.
TEST_F(RegionCopies, ABundleNamesTheObjectsWhoseRegionsItsStoreDoesNotVouchFor) {
  const fs::path a = dir / "a";
  for (int depth : {4, 2, 3}) run_checked(depth, 1, options(a, "max-autotune", true), 0.25f * depth);
  (void)region_counts();
  const auto compiled = region_files(a);
  ASSERT_EQ(compiled.size(), 2u);
  const auto version = [](const std::string& bytes) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + 8, sizeof v);
    return v;
  };
  const auto import = [&](const format::Bundle& b, const std::string& into) {
    const std::string bytes = format::write_bundle(b);
    const auto t = cache::admin::import_bytes(bytes, (dir / into).string());
    return std::make_pair(version(bytes), t.regions);
  };
  // An export marks no region used (their age is their last use by a compile).
  const fs::path first = a / format::names::kRegionsDir / format::names::region_file(compiled.begin()->first);
  const timespec old[2] = {{1000000, 0}, {1000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, first.c_str(), old, 0), 0);
  const format::Bundle whole = cache::admin::read_cache(a.string());
  EXPECT_EQ(whole.objects.size(), 3u);
  EXPECT_TRUE(whole.unvouched.empty()) << "every depth's program took the regions its store holds";
  struct stat st {};
  ASSERT_EQ(::stat(first.c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1000000) << "an export marked a region used";
  const auto all = import(whole, "b1");
  EXPECT_LT(all.first, 8u) << "a bundle vouching for all is read by earlier builds";
  EXPECT_EQ(all.second, 2u);
  // A bundle naming an object it lacks is refused, nothing imported.
  format::Bundle forged = whole;
  forged.unvouched.insert(std::string(32, '0'));
  EXPECT_THROW((void)import(forged, "b2"), CacheError);
  EXPECT_FALSE(fs::exists(dir / "b2" / format::names::kObjectsDir));

  // The first region's file another program (its decisions' steps one
  // more): every object calling it is named; nothing of them is copied.
  {
    const storage::Store s = storage::Store::open(a, storage::Create::no);
    format::RegionRecord r = *storage::read_region(s, compiled.begin()->first);
    ASSERT_FALSE(r.artifact.compiled.autotune.empty());
    r.artifact.compiled.autotune[0].chosen += " ";
    const auto held = s.writing();
    storage::put_region(s, compiled.begin()->first, format::encode_region_file(r.validity, r.artifact), held, true);
  }
  const format::Bundle edited = cache::admin::read_cache(a.string());
  EXPECT_EQ(edited.unvouched.size(), 3u);
  const auto none = import(edited, "b3");
  EXPECT_EQ(none, std::make_pair(uint32_t{8}, std::size_t{0}));
  EXPECT_TRUE(region_files(dir / "b3").empty());
  // Removed, or refused (writable by others): the same, and the export goes on.
  fs::remove(first);
  EXPECT_EQ(cache::admin::read_cache(a.string()).unvouched.size(), 3u);
  std::ofstream(first) << "x";
  fs::permissions(first, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  EXPECT_EQ(cache::admin::read_cache(a.string()).unvouched.size(), 3u);
  fs::remove(first);

  // save_cache_artifacts: a process that compiled in `c` vouches through
  // c's regions/; one that loaded the program from a store lacking its
  // regions does not.
  const fs::path c = dir / "c";
  {
    const process::Context::Scope fresh;
    run_checked(3, 1, options(c, "max-autotune", true), 0.0f);
    load_cache_artifacts(save_cache_artifacts(), (dir / "d1").string());
  }
  EXPECT_EQ(region_files(dir / "d1").size(), 2u);
  for (const auto& [key, r] : region_files(c))
    fs::remove(c / format::names::kRegionsDir / format::names::region_file(key));
  {
    const process::Context::Scope fresh;
    run_checked(3, 1, options(c, "max-autotune", true), 0.0f);
    load_cache_artifacts(save_cache_artifacts(), (dir / "d2").string());
  }
  EXPECT_FALSE(testing_support::entries((dir / "d2").string()).empty());
  EXPECT_TRUE(region_files(dir / "d2").empty()) << "regions its store does not hold were vouched for";
}

// An archived object (default mode) holds its regions' optimized bodies,
// not their programs: a copy writes that body and a later load lowers it
// again, so a store vouches for such a region only when its file holds the
// same body, not only the same program.
TEST_F(RegionCopies, AnArchivedObjectsRegionIsVouchedForOnlyWithItsOptimizedBody) {
  const fs::path a = dir / "a";
  run_checked(3, 1, options(a, "default"), 0.0f);
  (void)region_counts();
  EXPECT_TRUE(cache::admin::read_cache(a.string()).unvouched.empty());
  const auto files = region_files(a);
  ASSERT_EQ(files.size(), 2u);
  {  // the first region's file: its program and decisions, the other region's optimized body
    format::RegionRecord r = files.begin()->second;
    r.artifact.compiled.optimized = std::next(files.begin())->second.artifact.compiled.optimized;
    const storage::Store s = storage::Store::open(a, storage::Create::no);
    const auto held = s.writing();
    storage::put_region(s, files.begin()->first, format::encode_region_file(r.validity, r.artifact), held, true);
  }
  EXPECT_EQ(cache::admin::read_cache(a.string()).unvouched.size(), 1u);
}

}  // namespace
}  // namespace npucache
