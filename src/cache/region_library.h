// The compiled regions of a store as one compile uses them
// (storage/regions.h): before a compile, the regions its trace calls that
// the store holds, waiting (bounded) for those another process is
// compiling now; during it, each region it compiles stored at once, for the
// processes waiting. The rendezvous is the claim of storage/claims.h on
// the region key: the first process needing a region the store lacks
// claims it and compiles it; the others poll the store and take it. So a
// layer shared by every stage, rank and process of a job on one store
// compiles once, and a later job of another layout or depth compiles none
// (docs/ARCHITECTURE.md, "Regions in the store").
//
// What bounds a wait: a killed claimer's claim is dropped by the kernel
// (the next poll claims); a stuck one costs at most `wait_s`, then this
// process compiles the region itself; claims are taken in key order and a
// process holding claims waits only for regions of higher keys, so two
// processes never wait on each other. A region file that is damaged or
// named by another region's key is reported and compiled again (stored in
// its place), never served.
//
// Errors: none escape. A store that cannot be read or written makes the
// regions it concerns compiled here, logged at debug level; a
// region file that decodes but does not fit its calls fails the link, and
// the caller compiles again after distrust() (MethodSource::compile_timed).
#pragma once

#include "compiler/compiled_graph.h"
#include "format/region_file.h"
#include "storage/claims.h"
#include "storage/store.h"

#include <npucache/trace.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace npucache::cache {

class RegionLibrary {
 public:
  // Over `store`, open (MethodCache::region_store(): the call path opens
  // its directory no more often than without regions). `validity`:
  // everything but the region of what a region is valid for (this method's
  // config, whose hash it holds, runtime version, decompositions, dynamic,
  // format version).
  RegionLibrary(storage::Store store, CompilerConfig config, format::RegionValidity validity, double wait_s,
                double poll_s = 0.05);
  ~RegionLibrary();
  RegionLibrary(const RegionLibrary&) = delete;
  RegionLibrary& operator=(const RegionLibrary&) = delete;

  // Takes what the store holds of `trace`'s regions, claims or waits for
  // the rest. Then hints() holds the regions to take as they are.
  void prepare(const TraceResult& trace);
  // The hints for compile_graph: the stored regions, and the callback that
  // stores each region the compile compiles (releasing its claim).
  const compiler::CompileHints& hints() const { return hints_; }
  // After the compile (or its failure): releases the claims left.
  void finish();
  // The regions taken did not fit the compile (a link refused them): the
  // next compile with these hints compiles every region and stores each in
  // place of the file it took.
  void distrust();
  // How long storing a region waits for a sweep (gc, clear) to end.
  static constexpr double kStoreWaitSeconds = 2;

  // What prepare found: regions taken from the store, of which after a
  // wait for another process; waits that ran out (compiled here);
  // damaged files met (compiled again).
  int reused() const { return static_cast<int>(stored_.size()); }
  int waited() const { return waited_; }
  int timed_out() const { return timed_out_; }
  int damaged() const { return damaged_; }
  double wait_s() const { return wait_total_s_; }
  // The store key of region `region` (its body hash) for this compile.
  std::string key_of(const std::string& region) const;

 private:
  std::optional<compiler::CompiledRegion> read(const std::string& region);
  void keep(const std::string& region, const compiler::CompiledRegion& r);

  std::string dir_;
  storage::Store store_;
  CompilerConfig config_;
  format::RegionValidity validity_;
  double wait_s_, poll_s_;
  std::map<std::string, Graph> bodies_;  // of the trace, by region
  std::map<std::string, compiler::CompiledRegion> stored_;
  std::set<std::string> reported_;  // regions whose file was found damaged
  std::mutex mu_;                   // claims_ (the callback runs on the compiling thread)
  std::map<std::string, storage::Claim> claims_;
  compiler::CompileHints hints_;
  bool replace_ = false;  // distrust(): store in place of the files taken
  int waited_ = 0, timed_out_ = 0, damaged_ = 0;
  double wait_total_s_ = 0;
};

}  // namespace npucache::cache
