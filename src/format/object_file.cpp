#include "format/object_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "format/record_codec.h"
#include "format/view.h"
#include "h5/h5.h"

#include <optional>
#include <string>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

// The object record of a file: damaged, of an earlier format, or read.
ObjectMeta decode_meta(std::string_view body, const std::string& what, std::string& key) try {
  if (newer_object_record(body))  // intact, of an encoding after this build's
    throw OtherFormat(what + " is of another npucache cache format: its object record is of encoding " +
                      std::to_string(static_cast<uint8_t>(body[1])) + " (this build reads " +
                      std::to_string(kRecordEncoding) + ")");
  // The formats before 4.0.0 began the record with the graph key's length.
  if (body.size() >= 4 && body.substr(0, 4) == std::string_view("\x20\0\0\0", 4))
    throw CacheError(what + " was written by cache format 3.0.0 or earlier (another record encoding; this is format " +
                     names::kFormatVersion + "): it is stale and never read; `npucache verify --repair` removes it");
  ByteReader r(body, what);
  ObjectMeta m = read_object_meta(r, key);
  if (!r.done()) r.fail("its record has trailing bytes");
  return m;
} catch (const CacheError&) {
  throw;
} catch (const Error& e) {
  throw CacheError(e.what());
}

}  // namespace

std::string encode_object(const ObjectRecord& o) {
  // The content hash was made with the record (make_object) and is carried,
  // never recomputed: a record without one is a programming error.
  const ObjectMeta& m = o.meta;
  if (m.raw_size != o.raw.size() || !is_checksum(m.checksum))
    throw CacheError("internal: object " + o.graph_key + " has no content hash of its " + std::to_string(o.raw.size()) +
                     " bytes");
  ByteWriter w;
  write_object_meta(w, o.graph_key, m);
  const std::vector<std::string> records{w.take()};
  const std::size_t userblock = userblock_for(records);
  std::string image;
  {
    auto guard = h5::lock();
    h5::Handle f = create_view(userblock, EnvelopeKind::object);
    const h5::Id root = f.id();
    h5::write_attr(root, "graph_key", o.graph_key);
    h5::write_attr(root, "checksum", m.checksum);
    h5::write_attr(root, "raw_size", static_cast<int64_t>(m.raw_size));
    h5::write_bool_attr(root, "with_program", m.with_program);
    h5::write_attr(root, "compile_time_s", m.compile_time_s);
    h5::write_attr(root, "pass_times", m.pass_times);
    h5::write_attr(root, "canonical_hash", m.canonical_hash);
    // Who compiled it: "host pid <pid> rank <r> npucache <version>". The
    // key components (mode, dynamic...) are the entries' (the index's).
    h5::write_attr(root, "producer",
                   m.producer.host + " pid " + std::to_string(m.producer.pid) + " rank " +
                       std::to_string(m.producer.global_rank) + " npucache " + m.version);
    h5::write_attr(root, "date", m.date);
    h5::write_bytes(root, names::kModuleDataset, o.raw);
    h5::write_strings(root, names::kGraphDataset, o.graph_text);
    image = h5::image_bytes(f.id());
  }
  return seal(EnvelopeKind::object, records, std::move(image), userblock);
}

ObjectMeta object_meta(std::string_view file, const std::string& what, std::string* graph_key) {
  Opened o = open_envelope(EnvelopeKind::object, file, what);
  if (!o.records_intact || o.records.size() != 1) throw CacheError(what + " is damaged: its record fails its checksum");
  std::string key;
  ObjectMeta m = decode_meta(o.records[0], what, key);
  m.stored_size = file.size();
  if (graph_key) *graph_key = key;
  return m;
}

ObjectRecord decode_object(std::string_view file, const std::string& what, bool with_text) {
  Opened o = open_envelope(EnvelopeKind::object, file, what);
  if (!o.records_intact || o.records.size() != 1) throw CacheError(what + " is damaged: its record fails its checksum");
  if (!o.hdf5_intact) throw CacheError(what + " is damaged: its HDF5 part fails its checksum");
  ObjectRecord r;
  r.meta = decode_meta(o.records[0], what, r.graph_key);
  r.meta.stored_size = file.size();
  // The artifact's bytes without opening the HDF5 file when its one chunk
  // is found whose bytes match the content hash (the check below would
  // make of any other read); HDF5 reads it otherwise, and the graph text.
  std::optional<std::string> found;
  if (!with_text)
    found = h5::find_single_chunk(o.hdf5, static_cast<std::size_t>(r.meta.raw_size),
                                  [&](const std::string& bytes) { return checksum(bytes) == r.meta.checksum; });
  if (found) {
    r.raw = std::move(*found);
  } else {
    auto guard = h5::lock();
    h5::Handle f = h5::open_image(file);
    r.raw = h5::read_bytes(f.id(), names::kModuleDataset, static_cast<std::size_t>(r.meta.raw_size));
    if (with_text) r.graph_text = h5::read_strings(f.id(), names::kGraphDataset);
  }
  if (r.raw.size() != r.meta.raw_size)
    throw CacheError(what + " is damaged: it holds " + std::to_string(r.raw.size()) + " bytes, its record says " +
                     std::to_string(r.meta.raw_size));
  // Bytes from a file: checked against the content hash made with them.
  if (const std::string sum = checksum(r.raw); sum != r.meta.checksum)
    throw CacheError(what + " is damaged: its bytes fail their checksum (stored " + r.meta.checksum + ", read " + sum +
                     ")");
  return r;
}

}  // namespace npucache::format
