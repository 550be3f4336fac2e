// The cache layer throws npucache::CacheError, and CacheRefused for files it
// will not use (include/npucache/error.h).
#pragma once

#include <npucache/error.h>

namespace npucache::format {
using npucache::CacheError;
using npucache::CacheRefused;

// A file npucache wrote whose checksums pass but whose encoding is of a
// later cache format than this build's (a newer build's, beside this one
// on a shared directory): an envelope of a later version, a model or
// object record of a later encoding, a region record naming a later
// format version. Not damage: this build never uses it, and never removes
// it as damaged (gc, verify --repair); what it holds is unknown here, so
// gc collects no object while an index is of a later format
// (storage/gc.h). Every key and model_info hashes the format version, so
// only the side files every format shares by name (tuning.h5,
// profiles.h5) meet this build's writes: those are then left as they are
// (storage/side_files.h). One found where this build's own key names a
// file (made by hand) is replaced like a damaged one.
class OtherFormat : public CacheError {
 public:
  using CacheError::CacheError;
};

// An intact file an earlier cache format wrote (its record names its
// format version) whose program this build does not decode: stale, not
// damage. No key of this build names it (keys hash the format version),
// so no job uses it; a job of that earlier build still may (a rolling
// upgrade on a shared directory), so verify reports it stale and nothing
// removes it as damage: it goes by age, and first to fit a size limit.
class StaleFormat : public CacheError {
 public:
  using CacheError::CacheError;
};
}  // namespace npucache::format
