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

#include "storage/store.h"
#include "storage/uses.h"

#include <memory>
#include <string>
#include <vector>

namespace npucache::storage {

class RemoteTier;

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
