// A cache directory's side files: the decisions that are not programs.
// The tuning table (names::kTuningFile: the autotuner's choices, shared by
// every method and rank) and the dynamic-shape profiles (names::kProfileFile:
// the dims automatic dynamic made dynamic, per model_info and method), each
// with its shared copy on the remote tier. Storage alone reads and writes
// them; a call's life cycle (cache/method_cache.h) asks for them.
//
// Errors: never thrown. A missing file is no decisions; a damaged or
// foreign one is warned about, ignored and rewritten by the next save; a
// file that cannot be written is warned about once per directory (the
// decisions stay in this process).
#pragma once

#include <npucache/compile.h>

#include "compiler/tuning_table.h"
#include "format/profile_file.h"
#include "storage/store.h"
#include "storage/uses.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::storage {

class RemoteTier;

// The directory's tuning decisions and dynamic-shape dims, for a bundle or
// a push: none without a file; a damaged file is warned about and gives
// none.
std::vector<compiler::TuningRecord> stored_tuning(const Store& store);
std::vector<ProfileRecord> stored_profiles(const Store& store);
// Adds decisions and dims from elsewhere (an import, a pull), already
// validated, to the directory's files under their locks: what a file holds
// is kept (a decision by the tuning table's rule), a damaged file is
// warned about and rewritten. The count of records that were new; IoError
// or CacheError when a file cannot be written.
std::size_t add_tuning(const Store& store, const std::vector<compiler::TuningRecord>& records);
std::size_t add_profiles(const Store& store, const std::vector<ProfileRecord>& records);

// The name of a dim of a profile on the remote tier (BlobKind::profile),
// "<model_info>|<method>|<input>|<dim>", and back (nullopt: not one).
std::string profile_blob_name(const ProfileRecord& r);
std::optional<ProfileRecord> parse_profile_blob_name(const std::string& name);

class SideFiles {
 public:
  // `remote` may be null (no remote tier).
  SideFiles(std::string dir, std::shared_ptr<RemoteTier> remote);

  // Merges the remote's and the directory's tuning decisions into the
  // process's table (compiler/tuning_table.h), once per directory and
  // process. `store`: this directory, or null when it does not exist.
  void load_tuning(const Store* store) const;
  // Merges the file's decisions and the process's under the tuning lock
  // and rewrites the file when the process knows decisions the file lacks
  // (or the file is damaged). `store`: this directory, opened to write.
  void save_tuning(const Store& store) const;

  // The dims earlier processes made dynamic for `method` of `model_info`
  // (the file's and the remote's). `store`: this directory, or null when
  // it does not exist.
  std::vector<DimMark> load_profile(const Store* store, const std::string& model_info, const std::string& method) const;
  // Merges `dims` into the method's profile (under the profiles lock),
  // rewriting the file when something is new or it is damaged; adds them
  // to the remote's. `store`: this directory, opened to write.
  void save_profile(const Store& store, const std::string& model_info, const std::string& method,
                    const std::vector<DimMark>& dims) const;

 private:
  std::string dir_;
  std::shared_ptr<RemoteTier> remote_;
};

}  // namespace npucache::storage
