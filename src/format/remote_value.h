// What the remote tier stores in Redis (docs/FORMAT.md, "The remote
// tier"): the key names, all under one namespace holding the cache format
// version, and the encoding of every value. The only file that spells a
// remote key or value.
//
//   npucache:<format>:obj:<content hash>      an object (written once: its key is the hash of its value)
//   npucache:<format>:graph:<graph key>       which object holds a graph key (written once)
//   npucache:<format>:index:<model_info>      hash: entry path -> entry (written after its object)
//   npucache:<format>:models                  set of the model_infos with entries
//   npucache:<format>:blob:<kind>             hash: name -> record of a shared table (tuning, ...)
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

namespace npucache::cache {

namespace remote_key {
std::string prefix();  // "npucache:4.0.0:"
std::string object(const std::string& content_hash);
std::string graph(const std::string& graph_key);
std::string index(const std::string& model_info);
std::string models();
std::string blob(std::string_view kind);
}  // namespace remote_key

// The shared tables kept as blobs, one record per name. The dynamic-shape
// profile and captured-graph templates join here as kinds of their own.
// Shared tables: the tuning table (a decision per kernel), the dynamic-shape
// profiles (a dim per record, named "<model_info>|<method>|<input>|<dim>"),
// capture templates (a template file per record, named by its template
// key: cache/template_file.h).
enum class BlobKind { tuning, profile, capture_template };
std::string_view blob_kind_name(BlobKind k);

enum class RemoteKind : uint8_t { object = 1, graph = 2, entry = 3, blob = 4 };

// XXH3-128 of a value, 32 hex digits: an object's key.
std::string content_hash(std::string_view value);

// An object's value: its record with its artifact (record_codec.h:
// write_object), stored uncompressed (values of codec zstd are read too).
std::string encode_remote_object(const ObjectRecord& o);
// Checks the value against its key's hash (then the payload's own checksum
// is not needed; without `hash` it is checked), its header, the
// record, the graph key's grammar and `graph_key` (when not empty), the
// artifact's size (at most `max_raw_bytes`) and checksum.
ObjectRecord decode_remote_object(std::string_view value, const std::string& hash, const std::string& graph_key,
                                  std::size_t max_raw_bytes);

// Which object holds a graph key.
struct GraphRef {
  std::string graph_key;
  std::string object_hash;  // content_hash of the object's value
  uint64_t value_bytes = 0;
  uint64_t raw_size = 0;
  bool with_program = false;
  std::string checksum;  // of the artifact's bytes (ObjectMeta::checksum)
};
std::string encode_graph_ref(const GraphRef& g);
// Where the object hash lies in a graph reference value (header, the
// 32-digit graph key's str, the hash's length): a server-side reader can
// follow a reference in one round trip (remote::Backend::get_referenced);
// the reference and the object are checked as ever when they arrive.
inline constexpr std::size_t kGraphRefHashAt = 48 + 4 + 32 + 4;
inline constexpr std::size_t kGraphRefHashLen = 32;
GraphRef decode_graph_ref(std::string_view value, const std::string& graph_key);

// An index record: the entry (its model record, then its entry record), and
// the hash of its object's value when the writer knew it (empty: found
// through the graph key's GraphRef).
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
std::string encode_blob(const BlobRecord& b);
// `name` (when not empty) must be the record's.
BlobRecord decode_blob(std::string_view value, BlobKind kind, const std::string& name);

}  // namespace npucache::cache
