// The Mega-Cache bundle (docs/FORMAT.md): a versioned, checksummed,
// zstd-compressed list of entries and their objects, in the records of
// record_codec.h: the objects with their artifacts, each model's record
// followed by its entries, the capture templates, the tuning decisions and
// the dynamic-shape profiles (so a cache filled from a bundle starts warm).
//
//   bytes 0-7   magic "NPUCBNDL"
//   8-11        u32 format version (6, 7 with variant template keys, 8
//               naming objects whose regions nothing vouches for; 5 is
//               read, without the tuning decisions and profiles; earlier
//               ones are refused, naming why)
//   12-19       u64 payload bytes (compressed)
//   20-27       u64 decoded bytes (at most kMaxBundleBytes and
//               kMaxBundleRatio times the payload)
//   28-35       u64 xxh3-64 of the payload
//   36-         payload: one zstd frame of the records
//
// read_bundle never trusts a size: every length is checked against what
// remains and against the declared sizes, so damaged or hostile bytes give
// a CacheError, never a crash or an unbounded allocation.
#pragma once

#include "compiler/tuning_table.h"
#include "format/profile_file.h"
#include "format/records.h"

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

// A bundle's decoded records may not exceed 4 GiB, nor 4096 times its
// compressed payload (artifacts compress about tenfold): a header claiming
// more is refused before anything is allocated.
constexpr uint64_t kMaxBundleBytes = uint64_t{4} << 30;
constexpr uint64_t kMaxBundleRatio = 4096;

struct Bundle {
  std::vector<EntryRecord> entries;
  std::vector<ObjectRecord> objects;
  // Capture templates of the objects: (template key, the file's bytes).
  std::vector<std::pair<std::string, std::string>> templates;
  // The autotuner's decisions (tuning_file.h's records) and the dims
  // automatic dynamic made dynamic (profile_file.h's), each validated as
  // their files' records are.
  std::vector<compiler::TuningRecord> tuning;
  std::vector<ProfileRecord> profiles;
  // The objects (graph keys) holding compiled regions that the writer's
  // store does not vouch for: its regions/ did not hold every region of the
  // object's program as the program has it (cache/region_copies.h,
  // regions_held). A store may hold a program whose regions it never took
  // (an unsigned remote's claim), and the object alone proves nothing. An
  // importer copies the regions of every other object. Version 8, written
  // only when not empty: a reader of versions 5 to 7 (which copies every
  // object's regions) refuses such a bundle rather than spread them, and
  // reads every other bundle as before. Not authenticated: a bundle is
  // input its importer chose (the remote tier signs).
  std::set<std::string> unvouched;
};

std::string write_bundle(const Bundle& b);
// Throws CacheError naming what is wrong (magic, version, sizes, checksum,
// a malformed record, an artifact failing its content hash). Entries of one
// model must agree on its components (write_bundle throws otherwise).
Bundle read_bundle(std::string_view bytes);

// Decodes an object (with an entry's parameter names, or as stored when
// null) and validates its program, throwing when it cannot: the method
// cache's decode (cache/runnable.h), which import and the fuzzers pass.
using DecodeCheck = std::function<void(const ObjectRecord& o, const std::vector<std::string>* parameters)>;
// Everything a bundle from elsewhere must satisfy before anything of it is
// written (import, load_cache_artifacts): names in the layout's grammar,
// unique keys and paths, every object's bytes against its checksum and
// decodable into a valid program (`decodes`), every entry's object present
// with the checksum the entry records and binding the entry's parameters,
// every unvouched key one of its objects.
// Throws CacheError naming the first violation.
void validate_bundle(const Bundle& b, const DecodeCheck& decodes);

}  // namespace npucache::format
