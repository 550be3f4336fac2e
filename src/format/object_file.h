// The file of one compiled artifact, objects/<graph_key>.h5 (docs/FORMAT.md):
// written once by the first writer of its graph key, never changed. Its
// envelope record holds the object's facts (checksum, sizes, producer...);
// the HDF5 view holds them as attributes, the artifact's bytes as the
// zstd-compressed dataset /compiled_module and the traced graph as /graph.
#pragma once

#include "format/records.h"

#include <string>
#include <string_view>

namespace npucache::format {

std::string encode_object(const ObjectRecord& o);

// Validates everything (envelope, record, HDF5 part, the bytes' size and
// checksum) and throws CacheError naming `what` and what is wrong.
// `with_text` false skips the graph text (not needed to run).
ObjectRecord decode_object(std::string_view file, const std::string& what, bool with_text);
// Only the facts (the envelope record; no HDF5, no artifact bytes): `file`
// may be the file's first bytes, as many as its userblock
// (envelope_userblock), and stored_size is then their number.
ObjectMeta object_meta(std::string_view file, const std::string& what, std::string* graph_key = nullptr);

}  // namespace npucache::format
