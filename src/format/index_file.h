// The index file of one model, <model_info>.h5 (docs/FORMAT.md): its model
// components once, and every entry of the model (each method of each
// world size and rank) with its key components, ModelCacheMeta fields,
// parameter bindings and the graph key of its object. The records in the
// envelope are what npucache reads; the HDF5 view shows the same entries
// at the seed's paths, /<model_info>/[world<W>global_rank<R>/]<func>, each
// with an external link compiled_module -> objects/<graph_key>.h5. The
// records are the model record, the sequence record and the entry records
// of record_codec.h.
//
// The same encoding holds a model's base index (<model_info>.h5) and its
// deltas (deltas/<model_info>.<n>.h5: the entries a run of commits added or
// replaced, and the paths they removed); Store merges them (store.h).
#pragma once

#include "format/record_codec.h"
#include "format/records.h"

#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

struct IndexFile {
  std::string model_info;
  Components model;  // the model components (keys.h), shared by every entry
  std::vector<EntryRecord> entries;
  SequenceRecord seq;  // base or delta, its generation and sequence numbers
};

std::string encode_index(const IndexFile& index);

struct DecodedIndex {
  IndexFile index;           // what could be read (entries in path order)
  std::size_t damaged = 0;   // entries (or the model record) that could not
  bool intact = false;       // every record read
  bool hdf5_intact = false;  // the HDF5 view is undamaged
  // Written by a cache format before 4.0.0 (another record encoding): its
  // entries name their format_version, so a lookup reports them stale.
  bool earlier_format = false;
  // Its sequence record was read (an index of this format, undamaged
  // there); a base without one extends no delta.
  bool sequenced = false;
  // Store::index: the files merged (the base, then the deltas in sequence
  // order) and what was wrong with a file that could not be read at all.
  std::vector<std::string> files;
  std::vector<std::string> problems;
};
// Reads what is readable; throws CacheError (naming `what`) when nothing
// can be trusted (a damaged header or model record).
DecodedIndex decode_index(std::string_view bytes, const std::string& what);

}  // namespace npucache::format
