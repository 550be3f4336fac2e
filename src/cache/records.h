// What the store holds: entries (a rank's cached method, with every key
// component and its parameter bindings) and objects (one per graph key: the
// serialized compiled graph, stored once however many entries use it).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace npucache::cache {

struct EntryRecord {
  std::string path;                          // "<model_info>/[world8global_rank3/]<func>"
  std::map<std::string, std::string> attrs;  // key components and metadata (FORMAT.md)
  std::vector<std::string> parameters;       // parameter/buffer names, placeholder order
  std::string graph_key;                     // the object it uses
};

struct ObjectRecord {
  std::string graph_key;
  std::string raw;                           // serialized CompiledGraph (uncompressed)
  std::vector<std::string> graph_text;       // the traced graph, one line per element
  std::map<std::string, std::string> attrs;  // checksum, sizes, compile time, producer
};

// xxh3-64 of `bytes` as 16 hex digits.
std::string checksum(const std::string& bytes);

}  // namespace npucache::cache
