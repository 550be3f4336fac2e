// The envelope of every HDF5 file npucache writes (docs/FORMAT.md): the
// file's HDF5 userblock (a region HDF5 tools skip) holds a header and
// npucache's own records, each checksummed, and the HDF5 view of the same
// data follows:
//
//   bytes 0-7    magic "NPUCIDX1" (an index), "NPUCOBJ1" (an object),
//                "NPUCTUN1" (the tuning table), "NPUCPRF1" (the
//                dynamic-shape profiles) or "NPUCTPL1" (a capture template)
//   8-11         u32 envelope version (1)
//   12-15        u32 userblock size U (a power of two >= 512)
//   16-23        u64 record bytes R      24-31  u64 xxh3-64 of bytes 56..U
//                (the records and the zero padding after them)
//   32-39        u64 HDF5 bytes (file size - U)  40-47  u64 xxh3-64 of them
//   48-55        u64 xxh3-64 of bytes 0-47
//   56-          the records: [u32 length][u64 xxh3-64][body] each
//   U-           the HDF5 file
//
// Readers check everything before trusting a byte: a damaged byte anywhere
// is found by a checksum, never by HDF5's parser. Records checksummed one
// by one can be salvaged from a file whose other records are damaged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

enum class EnvelopeKind { index, object, tuning, profile, capture_template, compiled_region };

// The bytes of a file: the header and records in a userblock of
// `userblock` bytes, then `hdf5_image` (made with h5::create_image(userblock)).
std::string seal(EnvelopeKind kind, const std::vector<std::string>& records, std::string hdf5_image,
                 std::size_t userblock);
// The userblock size `records` need (a power of two >= 512).
std::size_t userblock_for(const std::vector<std::string>& records);
// "index", "object", "tuning", "profile", "template", "region": the `kind` attribute of the file's HDF5 view.
const char* kind_name(EnvelopeKind kind);

struct Opened {
  std::vector<std::string> records;  // the bodies that passed their checksums
  std::size_t damaged_records = 0;   // records that did not
  bool records_intact = false;       // all records passed (and their total checksum)
  bool hdf5_intact = false;          // the HDF5 part passed its checksum
  std::string_view hdf5;             // the HDF5 bytes (a view into the input)
  std::size_t userblock = 0;
};
// Does `head` (a file's first bytes) start with the magic of `kind`? A
// file that does is npucache's, damaged or not.
bool has_magic(EnvelopeKind kind, std::string_view head);
// The userblock size U that a file's header names (its bytes 12-15,
// unchecked: open_envelope checks it), 0 when `head` is shorter than that:
// a reader of the records alone reads the file's first max(U, 4096) bytes
// and opens them as the envelope (the HDF5 part then fails its check).
std::size_t envelope_userblock(std::string_view head);
// Reads an envelope. Throws CacheError naming `what` when the header is
// damaged or not npucache's (then nothing in the file can be trusted).
Opened open_envelope(EnvelopeKind kind, std::string_view file, const std::string& what);

}  // namespace npucache::format
