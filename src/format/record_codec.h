// The one binary encoding of npucache's records (docs/FORMAT.md, "Records"),
// wherever a record is stored or sent: the index file (a model record, then
// its entry records), the object file (an object record), the Mega-Cache
// bundle and the commit between ranks (object records with their artifact,
// model records, entry records) and the remote tier's values. In the bounded
// encoding of compiler/wire.h; every record starts with a kind letter and the
// record encoding version, so a record of another kind or encoding (or of
// the formats before 4.0.0, which had neither) is never read as this one.
//
// Readers check every length against what remains (ByteReader) and every
// field whose meaning the format fixes: names in the layout's grammar, ranges
// of integers, booleans, checksums' form, an object's size cap. A reader of an
// object's artifact also checks the bytes against the content hash the record
// carries: such bytes always come from outside (a bundle, another rank, the
// remote tier). Writers never hash: an object's content hash is computed once,
// when the record is made (make_object), and carried.
#pragma once

#include "compiler/wire.h"
#include "format/records.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

// The model part every entry of one model_info shares: its model components
// (keys.h). Stored once in an index file, once per model in a bundle, with
// each entry in the remote tier.
struct ModelRecord {
  std::string model_info;
  Components components;
};

// The record encoding version: the byte after every record's kind letter.
inline constexpr uint8_t kRecordEncoding = 1;
// Model and entry records are of encoding 2 (format 10.0.0): a model's
// components and an entry's parameter names are each one zstd frame (they
// grow with the model's depth and repeat their prefixes). Encoding 1 is
// read too, so that an index of an earlier format is reported stale by its
// format version.
inline constexpr uint8_t kModelEncoding = 2;
inline constexpr uint8_t kEntryEncoding = 2;
// The most bytes such a field may take once decompressed, and the most it
// may take per byte of its frame, both checked before allocating: decoded,
// a list costs about 8 bytes of memory per byte, so a record may never
// cost more than 16 MiB x 8, nor 256 x 8 times its own bytes. Names
// compress about 10-30x; a frame of zeros, thousands of times.
inline constexpr uint64_t kMaxCompressedField = uint64_t{16} << 20;
inline constexpr uint64_t kMaxCompressionRatio = 256;

// 16 GiB: far above any artifact (a 70B stage's program is megabytes), low
// enough that a damaged size cannot exhaust memory.
inline constexpr uint64_t kMaxArtifactBytes = uint64_t{16} << 30;

// The entry components, in the order an entry record holds them (the other
// key components are the model's).
const std::vector<std::string>& entry_component_names();
// The model record of an entry: its model_info and model components.
ModelRecord model_of(const EntryRecord& e);
// Whether `s` is a checksum as records hold them: 16 lowercase hex digits.
bool is_checksum(std::string_view s);

// --- Records ---------------------------------------------------------------
// The model record: 'M', version, model_info, the model components.
void write_model(compiler::ByteWriter& w, const ModelRecord& m);
ModelRecord read_model(compiler::ByteReader& r);

// The sequence record of an index file (format 5.0.0), after its model
// record: 'Q', version, u8 delta, u64 generation, u64 first, u64 last,
// strings removed. A base (<model_info>.h5; delta 0, first 0) names its
// generation (a random id, new with every base) and the last sequence
// number of the deltas it includes; a delta (deltas/<model_info>.<first>.h5)
// names the generation of the base it extends, the sequence numbers
// [first, last] of the commits it holds, and the entries they removed.
struct SequenceRecord {
  bool delta = false;
  uint64_t generation = 0;
  uint64_t first = 0;
  uint64_t last = 0;
  std::vector<std::string> removed;  // entry paths (a delta's tombstones)
};
void write_sequence(compiler::ByteWriter& w, const SequenceRecord& q);
SequenceRecord read_sequence(compiler::ByteReader& r, const ModelRecord& model);
bool is_sequence_record(std::string_view body);

// The entry record: 'E', version, path, the entry components, the
// ModelCacheMeta fields, the rank, parameters, its object's graph key and
// content hash, compile time, with_program. Read under `model`: the path
// must be an entry of model.model_info; the entry's components are the
// model's and its own.
void write_entry(compiler::ByteWriter& w, const EntryRecord& e);
EntryRecord read_entry(compiler::ByteReader& r, const ModelRecord& model);

// The object record: 'O', version, graph key and the object's facts (its
// content hash and size among them). An object file holds it alone (the
// artifact is in the file's HDF5 part).
void write_object_meta(compiler::ByteWriter& w, const std::string& graph_key, const ObjectMeta& m);
ObjectMeta read_object_meta(compiler::ByteReader& r, std::string& graph_key);

// An object with its artifact, as bundles, ranks and the remote tier carry
// it: the object record, then the artifact's raw_size bytes, then the traced
// graph's text. Reading checks the artifact against the record's content
// hash and refuses one above `max_raw_bytes`.
void write_object(compiler::ByteWriter& w, const ObjectRecord& o);
ObjectRecord read_object(compiler::ByteReader& r, uint64_t max_raw_bytes = kMaxArtifactBytes);

// Who made an entry or an object: world size, global, tp and pp rank, host,
// pid (part of the entry and object records).
void write_producer(compiler::ByteWriter& w, const Producer& p);
Producer read_producer(compiler::ByteReader& r);

// Whether `body`, a record that passed its checksum, is a model ('M') or
// object ('O') record of an encoding newer than this build reads: another
// cache format's record, not damage (cache_error.h, OtherFormat).
bool newer_model_record(std::string_view body);
bool newer_object_record(std::string_view body);

// --- Index records of the formats before 4.0.0 ------------------------------
// Cache formats 2.0.0 and 3.0.0 wrote index records without a kind letter
// (a kind byte 1 or 2) in another layout. They are read, never written, so
// that their entries are reported stale with their version (each names
// its format_version; one naming this version is damaged). Whether a
// record is of that encoding: its first byte.
bool is_earlier_index_record(std::string_view body);
ModelRecord read_earlier_model(compiler::ByteReader& r);
EntryRecord read_earlier_entry(compiler::ByteReader& r, const ModelRecord& model);

}  // namespace npucache::format
