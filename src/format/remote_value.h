// What the remote tier stores (docs/FORMAT.md, "The remote tier"): the key
// names, all under one namespace holding the cache format version, and the
// encoding of every value. The only file that spells a remote key or value.
// Plain keys and values (remote/backend.h), each key computed by the reader
// that needs it, so keys may be spread over several servers:
//
//   npucache:<format>:obj:<graph key>           an object (written once)
//   npucache:<format>:entry:<entry path>        an entry (its path starts with its model_info)
//   npucache:<format>:blob:<kind>:<name>        a record of a shared table (tuning, ...)
//
// A warm read is one get: a reader that traced a graph reads its object by
// the graph key; a reader that knows its entry path reads the entry, then
// the object it names. An entry carries the content hash of the object's
// value when its writer wrote that value, and the reader checks it.
// Listing (keys by prefix) is for what is read as a table: a model's
// entries (`npucache remote ls/pull`), the shared tables before a compile.
//
// Every value starts with a 48-byte header (magic, kind, codec, sizes,
// checksums of the payload and of the header) and is decoded by bounded
// readers: a damaged, truncated, foreign or hostile value gives a
// CacheError naming what is wrong, never a crash or an unbounded
// allocation (tests/fuzz/fuzz_decoders.cpp).
#pragma once

#include "format/records.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace npucache::format {

namespace remote_key {
std::string prefix();  // "npucache:8.0.0:"
std::string object(const std::string& graph_key);
std::string entry(const std::string& path);
// The prefix of every entry key, and of a model's.
std::string entries();
std::string entries(const std::string& model_info);
std::string blob(std::string_view kind, const std::string& name);
// The prefix of a table's records (and of those whose name starts with `name_prefix`).
std::string blobs(std::string_view kind, const std::string& name_prefix = "");
}  // namespace remote_key

// The shared tables kept as blobs, one record per name. The dynamic-shape
// profile and captured-graph templates join here as kinds of their own.
// Shared tables: the tuning table (a decision per kernel), the dynamic-shape
// profiles (a dim per record, named "<model_info>|<method>|<input>|<dim>"),
// capture templates (a template file per record, named by its template
// key: cache/template_file.h).
// template_variant: a capture template named by its variant key
// ("<template key>.<variant>"), a kind of its own so that builds that know
// only `template` records (one per template key) never meet its names.
enum class BlobKind { tuning, profile, capture_template, template_variant };
std::string_view blob_kind_name(BlobKind k);

// graph: a graph reference of formats 6.0.0 and before (no longer written;
// read as any value of another kind is: refused).
enum class RemoteKind : uint8_t { object = 1, graph = 2, entry = 3, blob = 4 };

// XXH3-128 of a value, 32 hex digits: an object's content hash (entries
// name it).
std::string content_hash(std::string_view value);

// An object's value: its record with its artifact (record_codec.h:
// write_object), stored uncompressed (values of codec zstd are read too).
std::string encode_remote_object(const ObjectRecord& o);
// Checks the value against its content hash (then the payload's own
// checksum is not needed; without `hash` it is checked), its header, the
// record, the graph key's grammar and `graph_key` (when not empty), the
// artifact's size (at most `max_raw_bytes`) and checksum.
ObjectRecord decode_remote_object(std::string_view value, const std::string& hash, const std::string& graph_key,
                                  std::size_t max_raw_bytes);

// An entry's value: the entry (its model record, then its entry record),
// and the content hash of its object's value when the writer wrote that
// value (empty: the object is read by its graph key unchecked by a hash).
struct RemoteEntry {
  EntryRecord entry;
  std::string object_hash;
};
std::string encode_remote_entry(const RemoteEntry& e);
// `path` (when not empty) must be the entry's; `model_info` (when not
// empty) its model.
RemoteEntry decode_remote_entry(std::string_view value, const std::string& path, const std::string& model_info);

// A record of a shared table: its kind's own encoding (tuning:
// encode_tuning_record).
struct BlobRecord {
  BlobKind kind = BlobKind::tuning;
  std::string name;
  std::string bytes;
};
// The largest payload of a record other than an object (an entry, a blob)
// a reader decodes: a writer never writes a larger one.
inline constexpr std::size_t kMaxRecordPayload = std::size_t{16} << 20;
std::string encode_blob(const BlobRecord& b);
// `name` (when not empty) must be the record's.
BlobRecord decode_blob(std::string_view value, BlobKind kind, const std::string& name);

}  // namespace npucache::format
