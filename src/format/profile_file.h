// The dynamic-shape profiles of a cache directory, profiles.h5
// (docs/FORMAT.md): for each method of each model (model_info and method
// name), the input dims automatic dynamic made dynamic -- seed 004's PGO
// cache, so that the next process compiles the dynamic version at once.
// Sealed like the other files (envelope.h): one checksummed record per
// dim, and an HDF5 view for people: one group per model_info holding the
// string dataset `dynamic_dims`, one line per dim ("<method>: <input> dim
// <d>").
//
// Like the tuning table, the file is never needed: one that is damaged or
// not npucache's is reported, ignored, and rewritten by the next save.
// Dims read from it only make a dim symbolic in a trace (a call the
// resulting graph does not fit fails to bind and is traced again), so a
// wrong profile costs a compile, never a wrong result.
#pragma once

#include <npucache/compile.h>

#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

struct ProfileRecord {
  std::string model_info;
  std::string method;
  DimMark dim;
  friend auto operator<=>(const ProfileRecord&, const ProfileRecord&) = default;
  friend bool operator==(const ProfileRecord&, const ProfileRecord&) = default;
};

// Bounds of what is read: far above real use.
inline constexpr std::size_t kMaxProfileRecords = std::size_t{1} << 16;
inline constexpr std::size_t kMaxProfileFileBytes = std::size_t{16} << 20;
inline constexpr int64_t kMaxProfileDim = 64;

// One dim, as the file's envelope records (and bundles) hold it; decode
// validates every field (CacheError naming `what`).
std::string encode_profile_record(const ProfileRecord& r);
ProfileRecord decode_profile_record(std::string_view body, const std::string& what);

// `records` sorted and without duplicates.
std::string encode_profiles(const std::vector<ProfileRecord>& records);
// Validates everything (envelope, records, fields, the HDF5 part's
// checksum) and throws CacheError naming `what` and what is wrong.
std::vector<ProfileRecord> decode_profiles(std::string_view file, const std::string& what);

}  // namespace npucache::format
