// What the store holds, typed: entries (one rank's cached method: its key
// components, ModelCacheMeta fields and parameter bindings) and objects (one
// per graph key: the serialized compiled graph, stored once however many
// entries use it). Their one binary encoding is record_codec.h; only the
// file kinds convert them to HDF5 attributes (docs/FORMAT.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

// Name -> value of every component of a lookup key (keys.h names them).
using Components = std::map<std::string, std::string>;

// Who an entry is for, or who produced an object.
struct Producer {
  int world_size = 1, global_rank = 0, tp_rank = 0, pp_rank = 0;
  std::string host;
  long pid = 0;
};

// Facts about an object's bytes and how they were produced.
struct ObjectMeta {
  // The content hash: xxh3-64 of the uncompressed bytes, 16 hex digits.
  // Computed once, when the record is made (make_object), and carried by
  // every copy; checked only when the bytes are read from outside.
  std::string checksum;
  uint64_t raw_size = 0;      // uncompressed bytes
  uint64_t stored_size = 0;   // bytes of the object's file (not stored: the file's size)
  bool with_program = false;  // holds the compiled DeviceProgram
  double compile_time_s = 0;
  std::string pass_times;  // "decompose=1.2ms; ..."
  std::string mode;        // compile mode name
  bool dynamic = true;
  std::string canonical_hash;  // of the traced graph
  Producer producer;           // producer.global_rank: the rank that compiled it
  std::string date;            // "2026-11-21 23:50:01.123456"
  std::string version;         // library version of the producer
};

struct ObjectRecord {
  std::string graph_key;
  std::string raw;                      // serialized CompiledGraph (uncompressed)
  std::vector<std::string> graph_text;  // the traced graph, one line per element
  ObjectMeta meta;
};

// The seed's ModelCacheMeta fields and the key of an entry.
struct EntryMeta {
  std::string name;  // "Model.prompt(x, y)"
  std::string date;
  std::string version;
  std::string fx = "None";
  std::string lookup_key;  // 16 hex digits over every component
  std::string model_info;
  Components components;  // identity and validity components (keys.h)
  Producer rank;          // the rank this entry is for
};

struct EntryRecord {
  std::string path;  // "<model_info>/[world8global_rank3/]<func>"
  EntryMeta meta;
  std::vector<std::string> parameters;  // parameter/buffer names, placeholder order
  std::string graph_key;                // the object it uses
  std::string object_checksum;          // the checksum of that object's bytes
  double compile_time_s = 0;            // what compiling the object cost
  bool with_program = false;            // the object holds the compiled program
};

// Why a lookup did not serve a stored program: no entry; an entry of
// another runtime or format version (or code_version on the fast path);
// traced from another computation (graph, guards, inputs); unreadable or
// damaged; bound to other inputs (fast path); the cache refused.
enum class MissReason { absent, stale, computation, corrupt, signature, refused };
std::string_view miss_reason_name(MissReason r);

// xxh3-64 of `bytes` as 16 hex digits.
std::string checksum(std::string_view bytes);

}  // namespace npucache::format
