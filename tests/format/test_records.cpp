// The record codec (src/format/record_codec.h): a record has one encoding in
// the index file, the object file, bundles and the remote tier's values; an
// object's content hash is made with its record and carried (no writer
// hashes the artifact again), and checked when bytes come from outside;
// files, bundles and values of earlier formats (tests/fixtures) are reported
// stale or refused with the reason, never misread.
#include <npucache/error.h>

#include "admin/admin.h"
#include "compiler/wire.h"
#include "format/bundle.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/index_file.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/object_file.h"
#include "format/record_codec.h"
#include "format/remote_value.h"
#include "h5/h5.h"
#include "storage/store.h"
#include "support/cache_files.h"
#include "support/error_message.h"
#include "support/process.h"
#include "support/temp_dir_test.h"
#include "zstd/zstd_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

using namespace npucache;
namespace fs = std::filesystem;
using testing_support::has;

namespace {

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::string kModelInfo = "Model_dynamic_0123456789abcdef";

cache::ObjectRecord sample_object() {
  cache::ObjectRecord o;
  o.graph_key = "0123456789abcdef0123456789abcdef";
  for (int i = 0; i < 300; ++i) o.raw += "artifact " + std::to_string(i) + ";";
  o.graph_text = {"graph(", "    %x: f32[s0, 2] input 'x'):", "  return (%x)"};
  cache::ObjectMeta& m = o.meta;
  m.raw_size = o.raw.size();
  m.checksum = cache::checksum(o.raw);
  m.with_program = true;
  m.compile_time_s = 1.5;
  m.pass_times = "decompose=1.000000ms";
  m.mode = "max-autotune";
  m.dynamic = true;
  m.canonical_hash = "00112233445566778899aabbccddeeff";
  m.producer = {2, 1, 1, 0, "node0", 4242};
  m.date = "2026-11-26 05:00:00.000001";
  m.version = "0.1.0";
  return o;
}

cache::EntryRecord sample_entry(const cache::ObjectRecord& o) {
  using namespace cache::component;
  cache::EntryRecord e;
  e.path = kModelInfo + "/world2global_rank1/prompt";
  e.meta.name = "Model.prompt(x)";
  e.meta.date = "2026-11-26 05:00:00.000002";
  e.meta.version = cache::names::kFormatVersion;
  e.meta.lookup_key = "fedcba9876543210";
  e.meta.model_info = kModelInfo;
  e.meta.components = {{kModelClass, "Model"},
                       {kParameterSignature, "0011223344556677"},
                       {kConfig, "8899aabbccddeeff"},
                       {kMode, "max-autotune"},
                       {kDynamic, "true"},
                       {kDecompositions, "default"},
                       {kConfigOptions, "autotune_candidates=2;"},
                       {kMethod, "prompt"},
                       {kRuntimeVersion, "simnpu-v1 runtime 1.0.0"},
                       {kFormatVersion, cache::names::kFormatVersion},
                       {kCodeVersion, "v1"}};
  e.meta.rank = {2, 1, 1, 0, "node0", 4242};
  e.parameters = {"linear.weight", "linear.bias"};
  e.graph_key = o.graph_key;
  e.object_checksum = o.meta.checksum;
  e.compile_time_s = 1.5;
  e.with_program = true;
  return e;
}

void expect_same(const cache::EntryRecord& a, const cache::EntryRecord& b) {
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.meta.name, b.meta.name);
  EXPECT_EQ(a.meta.date, b.meta.date);
  EXPECT_EQ(a.meta.version, b.meta.version);
  EXPECT_EQ(a.meta.fx, b.meta.fx);
  EXPECT_EQ(a.meta.lookup_key, b.meta.lookup_key);
  EXPECT_EQ(a.meta.model_info, b.meta.model_info);
  EXPECT_EQ(a.meta.components, b.meta.components);
  EXPECT_EQ(a.meta.rank.world_size, b.meta.rank.world_size);
  EXPECT_EQ(a.meta.rank.global_rank, b.meta.rank.global_rank);
  EXPECT_EQ(a.meta.rank.tp_rank, b.meta.rank.tp_rank);
  EXPECT_EQ(a.meta.rank.pp_rank, b.meta.rank.pp_rank);
  EXPECT_EQ(a.meta.rank.host, b.meta.rank.host);
  EXPECT_EQ(a.meta.rank.pid, b.meta.rank.pid);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.graph_key, b.graph_key);
  EXPECT_EQ(a.object_checksum, b.object_checksum);
  EXPECT_EQ(a.compile_time_s, b.compile_time_s);
  EXPECT_EQ(a.with_program, b.with_program);
}

void expect_same(const cache::ObjectRecord& a, const cache::ObjectRecord& b, bool with_bytes = true) {
  EXPECT_EQ(a.graph_key, b.graph_key);
  if (with_bytes) {
    EXPECT_EQ(a.raw, b.raw);
    EXPECT_EQ(a.graph_text, b.graph_text);
  }
  EXPECT_EQ(a.meta.checksum, b.meta.checksum);
  EXPECT_EQ(a.meta.raw_size, b.meta.raw_size);
  EXPECT_EQ(a.meta.with_program, b.meta.with_program);
  EXPECT_EQ(a.meta.compile_time_s, b.meta.compile_time_s);
  EXPECT_EQ(a.meta.pass_times, b.meta.pass_times);
  EXPECT_EQ(a.meta.mode, b.meta.mode);
  EXPECT_EQ(a.meta.dynamic, b.meta.dynamic);
  EXPECT_EQ(a.meta.canonical_hash, b.meta.canonical_hash);
  EXPECT_EQ(a.meta.producer.world_size, b.meta.producer.world_size);
  EXPECT_EQ(a.meta.producer.global_rank, b.meta.producer.global_rank);
  EXPECT_EQ(a.meta.producer.tp_rank, b.meta.producer.tp_rank);
  EXPECT_EQ(a.meta.producer.pp_rank, b.meta.producer.pp_rank);
  EXPECT_EQ(a.meta.producer.host, b.meta.producer.host);
  EXPECT_EQ(a.meta.producer.pid, b.meta.producer.pid);
  EXPECT_EQ(a.meta.date, b.meta.date);
  EXPECT_EQ(a.meta.version, b.meta.version);
}

template <class F>
std::string encoded(F&& write) {
  compiler::ByteWriter w;
  write(w);
  return w.take();
}

class RecordCodec : public testing_support::TempDirTest {
 protected:
  RecordCodec() : TempDirTest("records") {}
};

}  // namespace

// The model, entry and object records are the same bytes in an index file,
// an object file, a bundle and a remote value, and read back equal.
TEST_F(RecordCodec, OneEncodingInEveryFileBundleAndValue) {
  const cache::ObjectRecord o = sample_object();
  const cache::EntryRecord e = sample_entry(o);
  const cache::ModelRecord model = cache::model_of(e);
  const std::string model_bytes = encoded([&](auto& w) { cache::write_model(w, model); });
  const std::string entry_bytes = encoded([&](auto& w) { cache::write_entry(w, e); });
  const std::string object_bytes = encoded([&](auto& w) { cache::write_object_meta(w, o.graph_key, o.meta); });
  EXPECT_EQ(entry_bytes.substr(0, 2), std::string("E\x02", 2));
  EXPECT_EQ(model_bytes.substr(0, 2), std::string("M\x02", 2));
  EXPECT_EQ(object_bytes.substr(0, 2), std::string("O\x01", 2));

  // The index file: the model record, the sequence record, then the entry
  // records.
  const std::string index = cache::encode_index({kModelInfo, model.components, {e}, {}});
  const cache::Opened ix = cache::open_envelope(cache::EnvelopeKind::index, index, "index");
  ASSERT_EQ(ix.records.size(), 3u);
  EXPECT_EQ(ix.records[0], model_bytes);
  EXPECT_EQ(ix.records[1].substr(0, 2), std::string("Q\x01", 2));
  EXPECT_EQ(ix.records[2], entry_bytes);
  const cache::DecodedIndex d = cache::decode_index(index, "index");
  EXPECT_TRUE(d.intact);
  EXPECT_FALSE(d.earlier_format);
  ASSERT_EQ(d.index.entries.size(), 1u);
  expect_same(d.index.entries[0], e);

  // The object file: the object record alone (the artifact is in HDF5).
  const std::string file = cache::encode_object(o);
  const cache::Opened of = cache::open_envelope(cache::EnvelopeKind::object, file, "object");
  ASSERT_EQ(of.records.size(), 1u);
  EXPECT_EQ(of.records[0], object_bytes);
  expect_same(cache::decode_object(file, "object", true), o);

  // A bundle: the object record and its artifact, the model record, the entry record.
  const std::string bundle = cache::write_bundle({{e}, {o}, {}, {}, {}, {}});
  const std::string records = zstd::decompress(std::string_view(bundle).substr(36), std::size_t{1} << 20);
  EXPECT_TRUE(has(records, object_bytes + o.raw));
  EXPECT_TRUE(has(records, model_bytes + std::string("\x01\0\0\0", 4) + entry_bytes));
  const cache::Bundle b = cache::read_bundle(bundle);
  ASSERT_EQ(b.entries.size(), 1u);
  ASSERT_EQ(b.objects.size(), 1u);
  expect_same(b.entries[0], e);
  expect_same(b.objects[0], o);

  // Remote values: an entry is its model record and entry record; an
  // object its record and artifact.
  const std::string hash(32, 'c');
  const std::string entry_value = cache::encode_remote_entry({e, hash});
  EXPECT_EQ(entry_value.substr(48, model_bytes.size() + entry_bytes.size()), model_bytes + entry_bytes);
  const cache::RemoteEntry re = cache::decode_remote_entry(entry_value, e.path, kModelInfo);
  expect_same(re.entry, e);
  EXPECT_EQ(re.object_hash, hash);
  const std::string object_value = cache::encode_remote_object(o);
  EXPECT_EQ(object_value.substr(48, object_bytes.size() + o.raw.size()), object_bytes + o.raw);
  expect_same(cache::decode_remote_object(object_value, cache::content_hash(object_value), o.graph_key, 1 << 20), o);
  EXPECT_EQ(cache::remote_key::prefix(), std::string("npucache:") + cache::names::kFormatVersion + ":");
}

// A model's components and an entry's parameter names are zstd frames
// (encoding 2, format 10.0.0): a deep model's names take a fraction of
// their text, and read back the same. A frame claiming more than the cap
// is refused before anything is allocated; a damaged frame, a size that is
// not the frame's, trailing bytes inside it and an encoding this build does
// not know are refused naming what is wrong; an encoding-1 record (format
// 9.0.0 and before) still reads, so its entry is reported stale.
TEST_F(RecordCodec, CompressedNamesAreBoundedAndCheckedAndEncodingOneStillReads) {
  const cache::ObjectRecord o = sample_object();
  cache::EntryRecord e = sample_entry(o);
  std::size_t text = 0;
  e.parameters.clear();
  for (int layer = 0; layer < 80; ++layer)
    for (const char* p : {"attn_norm.weight", "q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                          "mlp_norm.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight"}) {
      e.parameters.push_back("model.layers." + std::to_string(layer) + "." + p);
      text += e.parameters.back().size();
    }
  const std::string entry_bytes = encoded([&](auto& w) { cache::write_entry(w, e); });
  EXPECT_LT(entry_bytes.size() * 5, text) << entry_bytes.size() << " bytes for " << text << " bytes of names";
  const cache::ModelRecord model = cache::model_of(e);
  const auto read_entry = [&](const std::string& bytes) {
    compiler::ByteReader r(bytes, "the entry record");
    cache::EntryRecord got = cache::read_entry(r, model);
    EXPECT_TRUE(r.done());
    return got;
  };
  expect_same(read_entry(entry_bytes), e);
  const auto refused = [&](const std::string& bytes) {
    return npucache::testing::error_message<Error>([&] { read_entry(bytes); });
  };

  // The entry's fields before the names, then the names as encoding 1 wrote them.
  const std::string head = encoded([&](auto& w) {
    cache::EntryRecord none = e;
    none.parameters.clear();
    cache::write_entry(w, none);
  });
  const std::string empty_names = encoded([](auto& w) { w.u64(4), w.str(zstd::compress(std::string(4, '\0'))); });
  const std::size_t at = head.find(empty_names);
  ASSERT_NE(at, std::string::npos);
  const std::string before = head.substr(0, at), after = head.substr(at + empty_names.size());
  const auto with_names = [&](const std::string& field) { return before + field + after; };
  ASSERT_EQ(with_names(empty_names), head);
  std::string v1 = with_names(encoded([&](auto& w) { w.strings(e.parameters); }));
  v1[1] = 1;
  // Encoding 1 claiming this format is refused (this format writes 2)...
  const std::string claims = refused(v1);
  EXPECT_TRUE(has(claims, std::string("an entry record of encoding 1 claims format ") + cache::names::kFormatVersion +
                              ", which writes encoding 2"))
      << claims;
  // ...and read when it says an earlier one, so that it is reported stale.
  const std::string version = e.meta.components.at(cache::component::kFormatVersion);
  const std::size_t vat = v1.find(version);
  ASSERT_NE(vat, std::string::npos);
  const std::string old = "9.0.0";
  std::string earlier = v1.substr(0, vat - 4) + encoded([&](auto& w) { w.str(old); }) + v1.substr(vat + version.size());
  cache::EntryRecord e9 = e;
  e9.meta.components[cache::component::kFormatVersion] = old;
  expect_same(read_entry(earlier), e9);

  const std::string raw = encoded([&](auto& w) { w.strings(e.parameters); });
  const std::string frame = zstd::compress(raw);
  const std::string huge = refused(with_names(encoded([&](auto& w) { w.u64(uint64_t{1} << 40), w.str(frame); })));
  EXPECT_TRUE(has(huge, "its parameter names claim 1099511627776 bytes (at most 16777216)")) << huge;
  // A frame of zeros claiming 4 MiB from 200-odd bytes: refused by the ratio, before decompressing.
  const std::string zeros = zstd::compress(std::string(std::size_t{4} << 20, '\0'));
  const std::string ratio = refused(with_names(encoded([&](auto& w) { w.u64(std::size_t{4} << 20), w.str(zeros); })));
  EXPECT_TRUE(has(ratio, "its parameter names claim 4194304 bytes from a frame of " + std::to_string(zeros.size()) +
                             " (at most 256 per byte)"))
      << ratio;
  std::string damaged = frame;
  damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 0x5a);
  const std::string bad = refused(with_names(encoded([&](auto& w) { w.u64(raw.size()), w.str(damaged); })));
  EXPECT_TRUE(has(bad, "its parameter names")) << bad;
  const std::string small = refused(with_names(encoded([&](auto& w) { w.u64(raw.size() - 1), w.str(frame); })));
  EXPECT_TRUE(has(small, "its parameter names")) << small;
  const std::string extra = raw + "x";
  const std::string trailing =
      refused(with_names(encoded([&](auto& w) { w.u64(extra.size()), w.str(zstd::compress(extra)); })));
  EXPECT_TRUE(has(trailing, "trailing bytes")) << trailing;
  std::string v3 = entry_bytes;
  v3[1] = 3;
  const std::string later = refused(v3);
  EXPECT_TRUE(has(later, "an entry record of encoding 3 (this build reads 1 to 2)")) << later;

  // The model record: its components in one frame, bounded the same way.
  const std::string model_bytes = encoded([&](auto& w) { cache::write_model(w, model); });
  {
    compiler::ByteReader r(model_bytes, "the model record");
    EXPECT_EQ(cache::read_model(r).components, model.components);
  }
  const std::string info = encoded([&](auto& w) { w.str(model.model_info); });
  const std::string bomb = std::string("M\x02", 2) + info + encoded([&](auto& w) {
                             w.u64(uint64_t{1} << 33), w.str(zstd::compress(std::string(1 << 16, '\0')));
                           });
  const std::string m = npucache::testing::error_message<Error>([&] {
    compiler::ByteReader r(bomb, "the model record");
    cache::read_model(r);
  });
  EXPECT_TRUE(has(m, "its model components claim 8589934592 bytes")) << m;
  // A parameter list longer than any writer records: refused, not copied into every entry.
  cache::ModelRecord long_list = model;
  std::string letters(cache::kMaxParameterList + 1, 'p');
  uint32_t x = 12345;  // letters that do not compress far: the ratio is not what refuses it
  for (char& c : letters) c = static_cast<char>('a' + ((x = x * 1103515245u + 12345u) >> 16) % 26);
  long_list.components[cache::component::kParameterList] = letters;
  const std::string long_bytes = encoded([&](auto& w) { cache::write_model(w, long_list); });
  const std::string l = npucache::testing::error_message<Error>([&] {
    compiler::ByteReader r(long_bytes, "the model record");
    cache::read_model(r);
  });
  EXPECT_TRUE(has(l, "its parameter list is 65537 bytes (a writer records at most 65536)")) << l;
}

// No writer hashes the artifact: a record made with a wrong content hash is
// written with it by the object file, the store, a bundle and a remote
// value, and refused by each reader (bytes from outside are checked). A
// record made without one is refused before anything is written.
TEST_F(RecordCodec, ContentHashIsCarriedByWritersAndCheckedByReaders) {
  cache::ObjectRecord o = sample_object();
  const std::string made = o.meta.checksum;
  o.meta.checksum = cache::checksum("other bytes");
  ASSERT_NE(o.meta.checksum, made);

  const std::string file = cache::encode_object(o);
  EXPECT_EQ(cache::object_meta(file, "object").checksum, o.meta.checksum);  // carried, not recomputed
  EXPECT_TRUE(has(npucache::testing::error_message<CacheError>([&] { cache::decode_object(file, "object", false); }),
                  "fail their checksum"));

  const cache::Store s = cache::Store::open(dir, cache::Create::yes);
  EXPECT_EQ(s.put_object(o, s.writing()).stored.meta.checksum, o.meta.checksum);
  EXPECT_TRUE(has(npucache::testing::error_message<CacheError>([&] { s.object(o.graph_key); }), "fail their checksum"));

  const std::string bundle = cache::write_bundle({{}, {o}, {}, {}, {}, {}});
  EXPECT_TRUE(
      has(npucache::testing::error_message<CacheError>([&] { cache::read_bundle(bundle); }), "fails its content hash"));

  const std::string value = cache::encode_remote_object(o);
  EXPECT_TRUE(has(npucache::testing::error_message<CacheError>(
                      [&] { cache::decode_remote_object(value, cache::content_hash(value), o.graph_key, 1 << 20); }),
                  "fails its content hash"));

  cache::ObjectRecord unhashed = sample_object();
  unhashed.meta.checksum.clear();
  EXPECT_TRUE(
      has(npucache::testing::error_message<CacheError>([&] { cache::encode_object(unhashed); }), "no content hash"));

  // With the hash it was made with, every reader takes it.
  o.meta.checksum = made;
  expect_same(cache::read_bundle(cache::write_bundle({{}, {o}, {}, {}, {}, {}})).objects.at(0), o);
  const std::string good = cache::encode_remote_object(o);
  expect_same(cache::decode_remote_object(good, cache::content_hash(good), o.graph_key, 1 << 20), o);
}

// A warm load reads an object's artifact from its one zstd chunk without
// opening HDF5 (h5::find_single_chunk): the bytes are those HDF5 reads;
// in an image, frames of another size, truncated frames and frames whose
// bytes the caller refuses are passed over; an artifact of several chunks
// is read by HDF5.
TEST_F(RecordCodec, ArtifactReadFromItsChunkIsWhatHdf5Reads) {
  const cache::ObjectRecord o = sample_object();
  const std::string file = cache::encode_object(o);
  EXPECT_EQ(cache::decode_object(file, "object", false).raw, o.raw);
  const cache::ObjectRecord hdf5 = cache::decode_object(file, "object", true);
  EXPECT_EQ(hdf5.raw, o.raw);
  EXPECT_EQ(hdf5.graph_text, o.graph_text);

  const std::string want(1000, 'w'), decoy(1000, 'd');
  const std::string other = zstd::compress(std::string(999, 'w')), good = zstd::compress(want);
  const std::string image = "junk\x28\xb5\x2f\xfd" + other + zstd::compress(decoy) + good.substr(0, good.size() / 2) +
                            "\x28\xb5" + good + "tail";
  int offered = 0;
  const auto found = h5::find_single_chunk(image, want.size(), [&](const std::string& bytes) {
    ++offered;
    return bytes == want;
  });
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, want);
  EXPECT_EQ(offered, 2);  // the decoy, then the whole good frame
  EXPECT_FALSE(h5::find_single_chunk(image, want.size(), [](const std::string&) { return false; }).has_value());
  EXPECT_FALSE(h5::find_single_chunk(image, 0, [](const std::string&) { return true; }).has_value());

  cache::ObjectRecord big = sample_object();
  big.raw.clear();
  for (int64_t i = 0; big.raw.size() < (std::size_t{9} << 20); ++i) big.raw += std::to_string(i * 7919) + ",";
  big.meta.raw_size = big.raw.size();
  big.meta.checksum = cache::checksum(big.raw);
  EXPECT_EQ(cache::decode_object(cache::encode_object(big), "object", false).raw, big.raw);
}

// An image built so that every offset holding a zstd magic starts a frame
// of the artifact's size (each frame's header is the contents of a raw
// block of the frame before it, all of them running to the image's end):
// the chunk's scan tries a handful of them and leaves the rest to HDF5,
// its work linear in the image, not in the image times the frames in it.
TEST_F(RecordCodec, ChunkScanOfNestedDecoyFramesIsBounded) {
  const std::size_t size = std::size_t{4} << 20;
  std::string header("\x28\xb5\x2f\xfd\xa0", 5);  // single segment, 4-byte content size
  for (int i = 0; i < 4; ++i) header += static_cast<char>((size >> (8 * i)) & 0xff);
  const std::string raw_block("\x48\x00\x00", 3);  // a raw block of 9 bytes: the next header
  std::string image = header;
  for (int i = 0; i < 100000; ++i) image += raw_block + header;
  image += std::string("\x01\x00\x00", 3);  // the last block, empty
  int offered = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto found = h5::find_single_chunk(image, size, [&](const std::string&) {
    ++offered;
    return false;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(found.has_value());
  EXPECT_LE(offered, 4);
  EXPECT_LT(seconds, 10.0);
}

// What formats 2.0.0 and 3.0.0 wrote (tests/fixtures/format-*): an index is
// read so that its entries name their format version (and a lookup
// reports them stale), an entry of that encoding claiming this version is
// damaged; object files, bundles and remote values are refused with why.
TEST_F(RecordCodec, EarlierFormatFixtureFilesAreStaleOrRefused) {
  for (const std::string version : {"2.0.0", "3.0.0"}) {
    const fs::path single = fs::path(FIXTURES) / ("format-" + version) / "single";
    int indexes = 0, objects = 0;
    for (const auto& f : fs::directory_iterator(single)) {
      if (f.path().extension() != ".h5" || f.path().filename() == cache::names::kTuningFile) continue;
      ++indexes;
      const cache::DecodedIndex d = cache::decode_index(contents(f.path()), f.path().string());
      EXPECT_TRUE(d.earlier_format) << f.path();
      EXPECT_TRUE(d.intact) << f.path();
      EXPECT_FALSE(d.index.entries.empty()) << f.path();
      for (const auto& e : d.index.entries)
        EXPECT_EQ(e.meta.components.at(cache::component::kFormatVersion), version) << e.path;
    }
    for (const auto& f : fs::directory_iterator(single / "objects")) {
      ++objects;
      const std::string bytes = contents(f.path());
      for (const std::string& why :
           {npucache::testing::error_message<CacheError>([&] { cache::decode_object(bytes, "object", true); }),
            npucache::testing::error_message<CacheError>([&] { cache::object_meta(bytes, "object"); })}) {
        EXPECT_TRUE(has(why, "was written by cache format 3.0.0 or earlier")) << why;
        EXPECT_TRUE(has(why, "stale and never read")) << why;
      }
    }
    EXPECT_GE(indexes, 3) << version;
    EXPECT_GE(objects, 3) << version;
  }

  // An entry of the earlier encoding that claims this format is damaged:
  // an earlier record never stands for a current one.
  const fs::path old_index = fs::path(FIXTURES) / "format-3.0.0/single/Model_dynamic_e4da69efb3eada98.h5";
  const std::string bytes = contents(old_index);
  const cache::Opened env = cache::open_envelope(cache::EnvelopeKind::index, bytes, "index");
  std::vector<std::string> records = env.records;
  ASSERT_GE(records.size(), 2u);
  for (std::size_t at; (at = records[1].find("3.0.0")) != std::string::npos;)
    records[1].replace(at, 5, cache::names::kFormatVersion);
  const std::string forged =
      cache::seal(cache::EnvelopeKind::index, records, std::string(env.hdf5), cache::userblock_for(records));
  const cache::DecodedIndex d = cache::decode_index(forged, "forged index");
  EXPECT_EQ(d.damaged, 1u);
  EXPECT_EQ(d.index.entries.size(), records.size() - 2);

  // A bundle of format 3.0.0 (version 4): refused, nothing imported.
  const std::string old_bundle = contents(fs::path(FIXTURES) / "format-3.0.0/single.npuc");
  const std::string why =
      npucache::testing::error_message<CacheError>([&] { cache::admin::import_bytes(old_bundle, dir.string()); });
  EXPECT_TRUE(has(why, "bundle format version 4 is not supported")) << why;
  EXPECT_TRUE(has(why, "written by cache format 3.0.0 or earlier")) << why;
  EXPECT_TRUE(testing_support::entries(dir.string()).empty());

  // Remote values of format 3.0.0 (value encoding 1), even under this
  // version's keys: refused, naming the encoding.
  const fs::path remote = fs::path(FIXTURES) / "format-3.0.0/remote";
  int values = 0;
  for (const auto& f : fs::directory_iterator(remote)) {
    const std::string name = f.path().stem().string(), v = contents(f.path());
    std::string got;
    if (name == "entry") {
      got = npucache::testing::error_message<CacheError>([&] { cache::decode_remote_entry(v, "", ""); });
    } else if (name.rfind("object-", 0) == 0) {
      const std::string hash = name.substr(7);
      ASSERT_EQ(cache::content_hash(v), hash);
      got = npucache::testing::error_message<CacheError>([&] { cache::decode_remote_object(v, hash, "", 1 << 20); });
    } else if (name.rfind("graph-", 0) == 0) {  // no longer a kind of value: refused as another kind
      got = npucache::testing::error_message<CacheError>([&] { cache::decode_remote_object(v, "", "", 1 << 20); });
      EXPECT_TRUE(has(got, "it is a graph reference, not a object")) << name << ": " << got;
      continue;
    } else {
      continue;
    }
    ++values;
    EXPECT_TRUE(has(got, "value encoding 1 (this build reads 2; it was written by cache format 3.0.0 or earlier)"))
        << name << ": " << got;
  }
  EXPECT_EQ(values, 2);
  EXPECT_NE(cache::remote_key::prefix(), "npucache:3.0.0:");
}
