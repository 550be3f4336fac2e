#include "format/remote_value.h"

#include "format/cache_error.h"
#include "format/names.h"
#include "format/record_codec.h"
#include "zstd/zstd_codec.h"

#include <xxhash.h>

#include <cstring>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;

namespace remote_key {
std::string prefix() { return std::string(names::kFormatName) + ":" + names::kFormatVersion + ":"; }
std::string object(const std::string& k) { return prefix() + "obj:" + k; }
std::string entry(const std::string& path) { return prefix() + "entry:" + path; }
std::string entries() { return prefix() + "entry:"; }
std::string entries(const std::string& m) { return prefix() + "entry:" + m + "/"; }
std::string blob(std::string_view kind, const std::string& name) { return blobs(kind) + name; }
std::string blobs(std::string_view kind, const std::string& name_prefix) {
  return prefix() + "blob:" + std::string(kind) + ":" + name_prefix;
}
}  // namespace remote_key

std::string_view blob_kind_name(BlobKind k) {
  switch (k) {
    case BlobKind::tuning: return "tuning";
    case BlobKind::profile: return "profile";
    case BlobKind::capture_template: return "template";
    case BlobKind::template_variant: return "template_variant";
  }
  return "unknown";
}

namespace {

constexpr char kValueMagic[8] = {'N', 'P', 'U', 'C', 'R', 'M', 'T', '1'};
// 1: the records of cache formats 3.0.0 and before; 2: those of
// record_codec.h (an entry with its model record).
constexpr uint32_t kValueVersion = 2;
constexpr std::size_t kValueHeader = 48;
constexpr uint8_t kStored = 0, kZstd = 1;
// Records other than objects are small: an entry, a reference, a decision.
constexpr std::size_t kMaxSmallValue = kMaxRecordPayload;
// Objects add their graph text and facts to the artifact's bytes.
constexpr std::size_t kObjectSlack = std::size_t{64} << 20;
// A payload may claim at most this many times its compressed size (as bundles).
constexpr uint64_t kMaxRatio = 4096;

std::string seal(RemoteKind kind, const std::string& payload, bool compress) {
  const std::string body = compress ? zstd::compress(payload) : payload;
  ByteWriter h;
  h.bytes(std::string_view(kValueMagic, sizeof kValueMagic));
  h.u8(static_cast<uint8_t>(kind));
  h.u8(compress ? kZstd : kStored);
  h.u8(0);
  h.u8(0);
  h.u32(kValueVersion);
  h.u64(body.size());
  h.u64(payload.size());
  h.u64(XXH3_64bits(body.data(), body.size()));
  h.u64(XXH3_64bits(h.data().data(), h.data().size()));
  return h.take() + body;
}

std::string remote_kind_name(RemoteKind k) {
  switch (k) {
    case RemoteKind::object: return "object";
    case RemoteKind::graph: return "graph reference";
    case RemoteKind::entry: return "entry";
    case RemoteKind::blob: return "table record";
  }
  return "value";
}

// The payload of a value of `kind`, every header field checked first: a
// view of `v` when stored, else decompressed into `scratch`. The payload's
// own checksum is skipped when `hashed` (the whole value was checked
// against its content hash already).
std::string_view open_value(std::string_view v, RemoteKind kind, std::size_t max_decoded, const std::string& what,
                            std::string& scratch, bool hashed = false) {
  const auto bad = [&](const std::string& why) -> std::string_view {
    throw CacheError(what + " is damaged or not npucache's: " + why);
  };
  if (v.size() < kValueHeader) return bad("it has " + std::to_string(v.size()) + " bytes, fewer than a header");
  if (std::memcmp(v.data(), kValueMagic, sizeof kValueMagic) != 0) return bad("no npucache remote magic");
  ByteReader h(v.substr(sizeof kValueMagic, kValueHeader - sizeof kValueMagic), what);
  const uint8_t got_kind = h.u8(), codec = h.u8(), reserved0 = h.u8(), reserved1 = h.u8();
  const uint32_t version = h.u32();
  const uint64_t p = h.u64(), d = h.u64(), payload_sum = h.u64(), header_sum = h.u64();
  if (header_sum != XXH3_64bits(v.data(), 40)) return bad("its header fails its checksum");
  if (got_kind != static_cast<uint8_t>(kind))
    return bad("it is a " + remote_kind_name(static_cast<RemoteKind>(got_kind)) + ", not a " + remote_kind_name(kind));
  if (codec != kStored && codec != kZstd) return bad("unknown codec " + std::to_string(codec));
  if (reserved0 != 0 || reserved1 != 0) return bad("reserved bytes are set");
  if (version != kValueVersion)
    return bad("value encoding " + std::to_string(version) + " (this build reads " + std::to_string(kValueVersion) +
               (version < kValueVersion ? "; it was written by cache format 3.0.0 or earlier)" : ")"));
  if (p != v.size() - kValueHeader)
    return bad("truncated or padded: the header says " + std::to_string(p) + " payload bytes, found " +
               std::to_string(v.size() - kValueHeader));
  if (d > max_decoded) return bad("it claims " + std::to_string(d) + " decoded bytes, above the cap");
  if (codec == kStored && d != p) return bad("a stored payload's sizes differ");
  if (codec == kZstd && d > kMaxRatio * p + 4096) return bad("it claims more than its payload can hold");
  const std::string_view body = v.substr(kValueHeader);
  if (!hashed && payload_sum != XXH3_64bits(body.data(), body.size())) return bad("its payload fails its checksum");
  if (codec == kStored) return body;
  scratch = zstd::decompress(body, static_cast<std::size_t>(d));
  if (scratch.size() != d) return bad("the payload decodes to another size");
  return scratch;
}

// Runs a decoder, turning any decoding error into a CacheError.
template <class F>
auto decoding(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const CacheError&) {
    throw;
  } catch (const Error& e) {
    throw CacheError(what + " is damaged: " + e.what());
  }
}

}  // namespace

std::string content_hash(std::string_view value) {
  const XXH128_hash_t h = XXH3_128bits(value.data(), value.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

std::string encode_remote_object(const ObjectRecord& o) {
  ByteWriter w;
  write_object(w, o);
  // Stored, not compressed: decompressing costs a reader more than the
  // bytes it saves cost a network between hosts (perf/bench_remote).
  return seal(RemoteKind::object, w.data(), false);
}

ObjectRecord decode_remote_object(std::string_view value, const std::string& hash, const std::string& graph_key,
                                  std::size_t max_raw_bytes) {
  const std::string what = "remote object " + (graph_key.empty() ? hash : graph_key);
  if (!hash.empty() && content_hash(value) != hash)
    throw CacheError(what + " is damaged: its bytes do not hash to its key (" + std::to_string(value.size()) +
                     " bytes)");
  std::string scratch;
  const std::string_view payload =
      open_value(value, RemoteKind::object, max_raw_bytes + kObjectSlack, what, scratch, !hash.empty());
  return decoding(what, [&] {
    ByteReader r(payload, what);
    ObjectRecord o = read_object(r, max_raw_bytes);  // its artifact checked against its content hash
    if (!r.done()) r.fail("trailing bytes");
    if (!graph_key.empty() && o.graph_key != graph_key) r.fail("it holds object " + o.graph_key + ", not " + graph_key);
    return o;
  });
}

std::string encode_remote_entry(const RemoteEntry& e) {
  ByteWriter w;
  write_model(w, model_of(e.entry));
  write_entry(w, e.entry);
  w.str(e.object_hash);
  return seal(RemoteKind::entry, w.data(), false);
}

RemoteEntry decode_remote_entry(std::string_view value, const std::string& path, const std::string& model_info) {
  const std::string what = "remote entry " + (path.empty() ? model_info : path);
  std::string scratch;
  const std::string_view payload = open_value(value, RemoteKind::entry, kMaxSmallValue, what, scratch);
  return decoding(what, [&] {
    ByteReader r(payload, what);
    RemoteEntry e;
    const ModelRecord model = read_model(r);
    if (!model_info.empty() && model.model_info != model_info) r.fail("it is an entry of model " + model.model_info);
    e.entry = read_entry(r, model);  // its path checked to be an entry of that model
    e.object_hash = r.str();
    if (!r.done()) r.fail("trailing bytes");
    if (!path.empty() && e.entry.path != path) r.fail("it is entry " + e.entry.path);
    if (!e.object_hash.empty() && !names::valid_graph_key(e.object_hash)) r.fail("it names no valid object hash");
    return e;
  });
}

std::string encode_blob(const BlobRecord& b) {
  ByteWriter w;
  w.str(blob_kind_name(b.kind));
  w.str(b.name);
  w.str(b.bytes);
  return seal(RemoteKind::blob, w.data(), false);
}

BlobRecord decode_blob(std::string_view value, BlobKind kind, const std::string& name) {
  const std::string what = "remote " + std::string(blob_kind_name(kind)) + " record";
  std::string scratch;
  const std::string_view payload = open_value(value, RemoteKind::blob, kMaxSmallValue, what, scratch);
  return decoding(what, [&] {
    ByteReader r(payload, what);
    BlobRecord b;
    b.kind = kind;
    if (r.str() != blob_kind_name(kind)) r.fail("it is a record of another table");
    b.name = r.str();
    b.bytes = r.str();
    if (!r.done()) r.fail("trailing bytes");
    if (!name.empty() && b.name != name) r.fail("it is stored under another name");
    return b;
  });
}

}  // namespace npucache::format
