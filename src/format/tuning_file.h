// The tuning table file of a cache directory, tuning.h5 (docs/FORMAT.md):
// every autotune decision the jobs using the directory made, keyed by
// kernel signature and runtime (compiler/tuning_table.h). Sealed like the
// index and object files (envelope.h): one checksummed envelope record per
// decision, and an HDF5 view for people: one group per runtime (its
// `runtime` attribute spells it) holding the string dataset `decisions`,
// one line per decision ("<key> | <chosen> | best <us> us | default <us>
// us | <n> candidates[ | <timed_on>]").
//
// The file is a cache of measurements, never needed: one that is damaged
// or not npucache's is reported, ignored, and rewritten by the next save.
#pragma once

#include "compiler/tuning_table.h"

#include <string>
#include <string_view>
#include <vector>

namespace npucache::format {

// At most this many decisions are read from (and written to) one file.
inline constexpr std::size_t kMaxTuningRecords = std::size_t{1} << 20;
// A file larger than this is not read.
inline constexpr std::size_t kMaxTuningFileBytes = std::size_t{256} << 20;

// One decision, as the file's envelope records (and the remote tier's
// values) hold it; decode validates every field (CacheError naming `what`).
std::string encode_tuning_record(const compiler::TuningRecord& r);
compiler::TuningRecord decode_tuning_record(std::string_view body, const std::string& what);

std::string encode_tuning(const std::vector<compiler::TuningRecord>& records);
// Validates everything (envelope, every record and its fields, the HDF5
// part's checksum) without trusting a length, and throws CacheError naming
// `what` and what is wrong; nothing of a damaged file is returned.
std::vector<compiler::TuningRecord> decode_tuning(std::string_view file, const std::string& what);

}  // namespace npucache::format
