// One cached method of one rank, and one duty: a call's life cycle in the
// cache. Its lookup key and entry path, the warm-start lookup, the stored
// object of a computation from either tier, its records, saving (adopting
// an object another writer stored first) and removing them, and the
// statistics they feed. What it reads and writes is storage's: the store
// (storage/store.h), opened once for a call path's reads and once for its
// writes; the objects of either tier behind one read
// interface (storage/object_source.h); the side files of decisions
// (storage/side_files.h).
//
// The caller says who is writing (world size, global/tp/pp rank, host, pid)
// and which runtime the method runs on: the cache layer discovers no
// identity of its own.
//
// Errors: a problem with the cache (unreadable, damaged, refused) is never
// fatal to a lookup: it is logged and makes a miss with its reason; a
// damaged object is removed so it is rebuilt. save() and remove_entry()
// throw CacheError (CacheRefused for an unsafe directory); callers log it
// once (warn_uncached) and continue uncached.
#pragma once

#include "cache/runnable.h"
#include "cache/uses.h"
#include "compiler/entry_source.h"
#include "format/keys.h"
#include "format/records.h"
#include "format/region_file.h"
#include "remote/config.h"
#include "storage/object_source.h"
#include "storage/side_files.h"
#include "storage/store.h"
#include "storage/uncached.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::cache {

struct MethodIdentity {
  std::string dir;         // absolute cache directory
  Producer who;            // the rank this entry is for, and its process
  int tp = 1, pp = 1;      // the job's tensor- and pipeline-parallel degrees
  KeyInputs key;           // module, method, config, ..., runtime version
  bool fast_path = false;  // serve without tracing when code_version matches
  remote::Config remote;   // the remote tier (none when not enabled)
  // Whether a coordinator summarises the job's entries at its rank 0: then
  // this rank's lines for each entry loaded, saved or reused are debug
  // lines, not info (a single process keeps TorchAir's info lines).
  bool summarised = false;
};

// The place of entry `path` of index `model_info`, as nearest_of_method
// names it: "world8global_rank3" for "<model_info>/world8global_rank3/m",
// "one process" for "<model_info>/m" and for a path not under model_info.
std::string entry_place(const std::string& path, const std::string& model_info);

// Throws ConfigError in a dry run (process/dry_run.h): `what` ("saving the
// entry of ...") is a write no dry run reaches.
void refuse_in_dry_run(const std::string& what);

class MethodCache {
 public:
  explicit MethodCache(MethodIdentity id);
  // The cache of another method of the same model and rank (a piece of a
  // method split at graph breaks: "decode.piece-<hash>").
  std::shared_ptr<MethodCache> for_method(const std::string& method) const;

  const std::string& dir() const { return id_.dir; }
  const Producer& who() const { return id_.who; }
  const LookupKey& key() const { return key_; }
  const std::string& entry_path() const { return path_; }
  const std::string& method() const { return id_.key.method; }
  const CompilerConfig& config() const { return id_.key.config; }
  // The store compiled regions are read from and stored in
  // (region_library.h): the call path's store for reads (no new open) when
  // the directory exists, else the directory created, as the save would.
  // Throws CacheError (CacheRefused) as store() does.
  Store region_store() const;
  // What a compiled region of this method's compiles is valid for but the
  // region itself (format/region_file.h): config hash, runtime version,
  // decompositions, dynamic, format version.
  format::RegionValidity region_validity() const;
  // Copies into this method's store the compiled regions `g` holds that
  // its regions/ lacks (region_copies.h): for an object that came from
  // elsewhere and is trusted as this store's own compiles are (another
  // store of the job, a signed remote). Returns how many; never throws.
  int copy_regions(const compiler::CompiledGraph& g) const;
  // Whether this method's store holds every compiled region of `g` in its
  // regions/, each the same program with the same decisions
  // (region_copies.h, regions_held): the store vouches for them, so they
  // may be copied where `g` goes. True when `g` calls no region (nothing
  // to copy). Throws CacheRefused (and CacheError when the store cannot
  // be opened); a region file that cannot be read vouches for nothing.
  bool regions_held(const compiler::CompiledGraph& g) const;
  // The region keys (region_library.h) of the regions `trace` calls that
  // regions/ lacks: what a compile of it would compile (all of them when
  // there is no store yet: nothing is created). Empty when the store
  // cannot be read (never throws).
  std::vector<std::string> regions_missing(const TraceResult& trace) const;
  // A region file of this store as stored ("" when there is none or it
  // cannot be read), and a region file compiled on another store of the
  // job stored here (put_region's checks; false when it was there, or
  // does not check: then a compile compiles it). Never throw.
  std::string region_file(const std::string& key) const;
  bool store_region_file(const std::string& key, const std::string& bytes) const;
  // Whether objects hold the compiled program (ge_cache in max-autotune).
  bool objects_with_program() const { return id_.key.ge_cache; }
  // Whether the method is captured and replayed (its captures are kept as
  // templates beside its objects).
  bool captures() const { return id_.key.config.captures(); }
  // The capture templates of the stored object `graph_key`.
  std::shared_ptr<compiler::TemplateStore> templates(const std::string& graph_key) const;
  // Whether a hit is decided without a trace (the code_version fast path).
  bool fast_path() const { return id_.fast_path; }
  // <dir>/<entry path>: the seed's path, for messages.
  std::string where() const;
  // <dir>/<entry path>/compiled_module: the seed's path of the artifact.
  std::string module_path() const;

  struct Lookup {
    std::shared_ptr<compiler::CompiledGraph> graph;  // set on a hit
    std::optional<EntryRecord> entry;
    std::string object_checksum;  // on a hit: the checksum of the object read (ObjectMeta::checksum)
    MissReason reason = MissReason::absent;
    std::vector<std::string> differences;  // what differs, or the error
    // Seconds of a hit's phases (WarmPhases): the store opened, the entry
    // and the object read (envelope checks and decompression included);
    // the object decoded; checked to give its own key; the program made
    // runnable for the call.
    double read_s = 0, decode_s = 0, own_key_s = 0, bind_s = 0;
    bool hit() const { return graph != nullptr; }
    // "absent", "stale (runtime_version: ...)", for a status report.
    std::string reason_text() const;
    // The miss's cause in words that are the same on every rank a change
    // touched, for a job's summary: "absent: another layout (stored world
    // 8 tp 2 pp 4, now world 4 tp 2 pp 2)", "absent: first run",
    // "absent: other settings (dynamic)", "stale: format_version",
    // "computation: graph"; empty on a hit.
    std::string cause() const;
  };
  // Looks this rank's entry up and decides whether its program serves this
  // call. With `trace` (the default hit check) the entry must have been
  // made from an equal trace (graph key `id`: graph, guards, input
  // signature, compile settings); without it (the code_version fast path)
  // its code_version and parameter signature must equal this process's.
  // Either way runtime and format version must match. Then the object is
  // read, verified, decoded, checked to be the computation of its key (the
  // graph key of its own trace, own_key.h: otherwise it is damaged, removed
  // and rebuilt) and bound to the call; an object without a program is
  // lowered from its stored graph through `compile`. Logs the
  // seed's "loaded from" line on a hit, the reason of a miss; records
  // statistics.
  Lookup lookup(const FlatArgs& args, const TraceResult* trace, const GraphId* id,
                const compiler::CompileStep& compile) const;

  GraphId graph_id(const TraceResult& traced) const;
  // Why a miss of this rank's graph `graph_key` compiles, as `npucache
  // explain --entry` puts it: the stored entry of this method nearest to
  // this rank's (any model_info, world size or rank; the fewest
  // differences) and what differs (key components, "place: stored
  // 'world8global_rank3', now 'world4global_rank1'", the graph key). No
  // path when the store holds no entry of this method. Only reads.
  struct Neighbour {
    std::string path;
    std::vector<std::string> differences;
  };
  Neighbour nearest_of_method(const std::string& graph_key) const;
  // The identity of this rank's store (Store::identity), creating the cache
  // directory if needed; a unique "unusable" identity when it cannot be
  // used (refused, unwritable), so such a rank is a store of its own, and
  // then *why_unusable (when given) says why. In a dry run
  // (process/dry_run.h) nothing is created or written, and the same is
  // predicted: an existing directory gives its identity
  // (Store::predicted_identity: unusable when it cannot be written); a
  // missing one is named by host and absolute path when it could be
  // created (its nearest existing ancestor a directory this process may
  // write), else it is unusable.
  std::string store_identity(std::string* why_unusable = nullptr) const;
  // The two tiers a stored object is read from.
  enum class Tier { local, remote };
  // The objects of a tier behind one read interface; null for the remote
  // tier when none is configured, and for the local one when its directory
  // does not exist or cannot be used.
  std::shared_ptr<const ObjectSource> objects(Tier tier) const;
  // Whether a tier holds the object `graph_key` (false when it cannot tell).
  bool holds(Tier tier, const std::string& graph_key) const;
  // A tier's object for `graph_key`, checked, decodable and giving its own
  // key (integrity()); nullopt when it has none (a damaged one is removed
  // locally, counted and removed remotely).
  std::optional<ObjectRecord> record(Tier tier, const std::string& graph_key) const;
  // A tier's object for a trace that missed its entry (another rank, world
  // size or a lost index stored it, or another host wrote it to the remote):
  // every check passed, decoded and bound to this trace and call; nullopt
  // when the tier has none or fails. The object's own trace must give
  // id.key (own_key.h): another computation's object is damaged (removed
  // locally; counted and removed remotely), never served. Costs a read and
  // a hash of the stored graph, never a compile.
  struct Stored {
    std::shared_ptr<compiler::CompiledGraph> graph;
    ObjectRecord object;
  };
  std::optional<Stored> stored(Tier tier, const GraphId& id, const TraceResult& trace, const FlatArgs& args,
                               const compiler::CompileStep& compile) const;

  // --- The remote tier (remote_tier.h) -------------------------------------
  // Null when no remote is configured.
  const std::shared_ptr<RemoteTier>& remote() const { return remote_; }
  // Whether the remote tier is signed (its values are a key holder's, not
  // claims): false without a remote.
  bool remote_signed() const;
  // The fast path's (HitCheck::code_version, no trace) remote lookup: this
  // rank's entry in the remote's index, of this code_version, parameter
  // signature, runtime and format version, its object checked, decoded,
  // giving its own key and bound to the call; null otherwise. Only from an
  // authenticated (signed) remote: an unsigned entry is a claim anyone who
  // can write the remote makes, so it is never read (said once at INFO)
  // and the caller traces.
  std::optional<Stored> remote_entry(const FlatArgs& args, const compiler::CompileStep& compile) const;
  // Commits `object` and this rank's entry for `g` to the local store in
  // the background (commit_queue.h): the next start is local. From a
  // signed remote, the regions `g` holds are copied too (copy_regions).
  void commit_later(const compiler::CompiledGraph& g, const ObjectRecord& object) const;
  // Writes what this process compiled back to the remote (objects first,
  // then entries) and the process's tuning decisions; nothing when there is
  // no remote or it cannot be written.
  void push_remote(const std::vector<ObjectRecord>& objects, const std::vector<EntryRecord>& entries) const;

  // The records of `g` under its graph id: its object (serialized as this
  // cache stores programs) and this rank's entry pointing at it.
  ObjectRecord make_object(const compiler::CompiledGraph& g, const GraphId& id) const;
  // The object of `g` from bytes produced elsewhere (another rank's
  // artifact, or a stored object), which hold the program or not as
  // `raw_with_program` says: the record says what the bytes hold.
  ObjectRecord make_object(const compiler::CompiledGraph& g, const GraphId& id, const std::string& raw,
                           bool raw_with_program) const;
  EntryRecord make_entry(const compiler::CompiledGraph& g, const ObjectRecord& object) const;

  // Commits records (this rank's, or those of every rank sharing the
  // store) through the store's one commit procedure (Store::commit: objects
  // published or adopted, entries recording the kept bytes, each index
  // once), then logs each saved entry, records statistics, remembers this
  // rank's entry for save_cache_artifacts(), saves the tuning table and
  // enforces the size limit. What the store kept is returned: a caller
  // whose object was adopted runs the kept bytes (runnable()), so every
  // user of a key runs the same program.
  Store::Committed save(Store::Commit c) const;

  // The program a call runs from stored bytes: cache/runnable.h's one path
  // (decode with `parameters`, tuning merged, bound, lowered when the bytes
  // hold no program, the module checked), for this method's module and
  // runtime.
  std::shared_ptr<compiler::CompiledGraph> runnable(const ObjectRecord& o, const std::vector<std::string>& parameters,
                                                    const FlatArgs& args, const compiler::CompileStep& compile) const;
  // Its second half, for bytes already decoded (cache/runnable.h: prepare).
  std::shared_ptr<compiler::CompiledGraph> prepare(Decoded d, const FlatArgs& args,
                                                   const compiler::CompileStep& compile) const;
  // The directory's side files of decisions (tuning table, dynamic-shape
  // profiles) and their remote copies.
  const SideFiles& side_files() const { return side_; }
  // The directory's tuning decisions merged into the process's table, once
  // per directory and process (side_files()).
  void load_tuning() const;
  // The process's tuning decisions merged into the directory's table now
  // (a coordinator's compiling rank, which is often not its store's
  // writer; save() does it for the writer). Never throws.
  void save_tuning() const;
  // The dims automatic dynamic made dynamic for this method in earlier
  // processes, and recording new ones (side_files(), for this method).
  std::vector<DimMark> load_profile() const;
  void save_profile(const std::vector<DimMark>& dims) const;
  // Records that this process uses `entry` (for save_cache_artifacts()).
  void remember(const EntryRecord& entry, const ObjectRecord& object) const;
  // Removes this rank's entry (after a recompile).
  void remove_entry() const;
  // Ends a call path (a first call, a recompile): the store its reads
  // shared is forgotten, so the next call path checks the directory again
  // as a fresh process would. MethodSource calls it when a path ends.
  void end_call_path() const;

 private:
  // For an absent entry: the nearest entry of the same method of the same
  // model class under another model_info: at the same place (world size,
  // rank) in the same layout, else in another layout (world size, tp, pp:
  // an entry of another place is never nearer than one of this place and
  // layout). `stale`: it is of another format or runtime version (a key
  // change moves model_info); else `diffs` names the settings that differ
  // ("dynamic: stored 'true', now 'false'", "config option
  // autotune_candidates: ...", "parameter w: stored f32[8, 4], now f32[4,
  // 4]"), after, for another layout, the layouts and the differing place
  // ("another layout (stored world 8 tp 2 pp 4, now world 4 tp 2 pp 2)",
  // "world size: stored 8, now 4", ...). No path: there is none.
  struct Nearest {
    std::string path;
    bool stale = false;
    bool other_layout = false;
    std::vector<std::string> diffs;
  };
  Nearest nearest(const Store& store) const;
  // What runnable() prepares for: this call of this method's module.
  CallSite site(const FlatArgs& args, const compiler::CompileStep& compile) const;
  // This directory's store. To read (Create::no): opened on first use and
  // kept while the directory is the one opened (a directory removed or
  // replaced is opened again), nullopt when it does not exist. To write
  // (Create::yes): opened again, with every check a fresh process makes,
  // and kept for the reads that follow. Throws CacheError (CacheRefused)
  // as Store::open does.
  std::optional<Store> store(Create create) const;
  // A store that can be read, or nullopt: absent, or not usable (a refused
  // directory is warned about once, as the lookup does).
  std::optional<Store> read_store() const;
  // Whether a stored object serves this method: it decodes and the graph
  // key of its own trace (with this method's key inputs) is the key it is
  // stored under (own_key.h); throws CacheError otherwise.
  ObjectSource::Check integrity() const;
  // The local tier over `store`, its objects checked with integrity().
  LocalObjects local_objects(const Store& store) const;
  struct OpenStore;

  MethodIdentity id_;
  LookupKey key_;
  std::string path_;
  std::shared_ptr<RemoteTier> remote_;
  SideFiles side_;
  std::shared_ptr<OpenStore> open_;  // shared by copies (commit_later's)
};

}  // namespace npucache::cache
