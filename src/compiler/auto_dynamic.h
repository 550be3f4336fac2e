// Automatic dynamic shapes (CompileOptions::dynamic unset), as
// torch.compile's: a method is compiled static first; when a later call
// changes the size of an input dim, that dim is marked dynamic and the
// method is compiled once more with it symbolic, after which no size of it
// recompiles. The marks (a "profile") are what seed 004's PGO cache keeps
// across processes (the cache's profiles.h5, merged across ranks by the
// coordinator).
//
// Not thread-safe: the engine uses it under its lock.
#pragma once

#include <npucache/compile.h>
#include <npucache/trace.h>

#include <map>
#include <string>
#include <vector>

namespace npucache::compiler {

class DynamicProfile {
 public:
  // Starts from the user's marks (CompileOptions::mark_dynamic/mark_static).
  DynamicProfile(std::vector<DimMark> marked_dynamic, std::vector<DimMark> marked_static);

  // Adds dims (from the cache's profile); marks the user made static stay
  // static. Returns the dims that were new.
  std::vector<DimMark> merge(const std::vector<DimMark>& dims);
  // The sizes of a call that was compiled: later calls are compared with
  // them.
  void note_compiled(const FlatArgs& args);
  // Dims whose size in `args` differs from the last compiled call's and
  // that are neither dynamic already nor marked static.
  std::vector<DimMark> changed_dims(const FlatArgs& args) const;

  // Dims made dynamic by automatic dynamic or the cache's profile (not the
  // user's own marks), sorted.
  const std::vector<DimMark>& learned() const { return learned_; }
  // The trace options' marks: every dynamic dim and every static one.
  // With `args`, dims learned dynamic whose size in `args` is below 2 are
  // left out (`size_one_fallback`): a trace made with them symbolic may
  // not fit such a call (broadcasting decisions), so it is traced static.
  void apply(TraceOptions& t, const FlatArgs* args = nullptr) const;
  bool has_learned() const { return !learned_.empty(); }

 private:
  bool is_dynamic(const DimMark& m) const;
  bool is_static(const DimMark& m) const;
  std::vector<DimMark> user_dynamic_, user_static_, learned_;
  std::map<std::string, std::vector<int64_t>> sizes_;  // of the last compiled call
};

// "arg0 dim 0"
std::string dim_text(const DimMark& m);

}  // namespace npucache::compiler
