// Every name npucache gives a file, a directory or an HDF5 object of a cache
// directory, and the cache format version: nobody else spells them
// (docs/FORMAT.md describes them).
//
//   <cache_dir>/                 0700
//     CACHEDIR.TAG               marks the directory as a cache (backup tools skip it)
//     store.json                 names the store: {"format": "npucache", "store_id": ...}
//     npucache.conf              the cache's own settings (max_size), `key = value` lines
//     config.json                where earlier versions kept max_size (read when npucache.conf has none)
//     stats.json                 hit/miss counters, last use, recent misses
//     <model_info>.h5            the index of one model (its base): its entries, at the seed's paths
//     deltas/<model_info>.<n>.h5 a delta of that index: the entries commits since the base added,
//                                replaced or removed (sequence n on), same HDF5 view
//     objects/<graph_key>.h5     one compiled artifact, written once, never changed
//     templates/<key>.h5         a capture template of an artifact under one binding of its sizes
//     regions/<key>.h5           a compile region's program, shared by every method that calls it
//     tuning.h5                  the tuning table: autotune decisions by kernel signature and runtime
//     profiles.h5                dynamic-shape profiles: dims automatic dynamic made dynamic, per method
//     locks/                     flock()ed files serialising writers of one index
//     .<name>.tmp.<pid>.<n>      a write in progress (in the target's directory)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace npucache::format::names {

// The cache format version (shown as ModelCacheMeta's version). Bump when
// the stored names or encodings change incompatibly; an entry of
// another version is stale. It is hashed into model_info, so each version
// has index files of its own (an earlier version's are found as the nearest
// entries and reported stale). 4.0.0: the records of record_codec.h.
// 5.0.0: an index is a base and deltas (deltas/), with a sequence record.
// 6.0.0: a graph-break piece's entry is named by the parameters it reads
// too (bound_names in <npucache/ir/hash.h>). 7.0.0: an op is stored by its
// pinned number; the remote tier is plain keys and values. 8.0.0: a graph
// may hold region_call nodes (op 63), and the compiled-graph record's trace
// carries the bodies of the regions it calls. 10.0.0: a model's components
// and an entry's parameter names are zstd frames. 11.0.0: the canonical
// graph hash counts each operand's writes in place before its reader (a read
// before an update and one after differ), and the graph key's and the
// components' texts are key_text()'s (a field holding a separator no longer
// joins like others).
inline constexpr const char* kFormatVersion = "11.0.0";
// Whether `version` ("X.Y.Z", numbers) is a cache format after this one: a
// newer build's (false for this one, earlier ones and anything else).
bool later_format(const std::string& version);
// Whether `version` (X.Y.Z) is earlier than this build's.
bool earlier_format(const std::string& version);

// The text a key hashes from several fields, joined so that no two lists
// of fields join alike (a field may hold any byte, the separator too):
// each as its length, ':', itself and '|' (format 11.0.0; fields joined by
// '|' alone before, so a runtime version or a decomposition name holding
// one could make two keys' texts equal).
std::string key_text(std::initializer_list<std::string_view> fields);
// The `format` attribute of every file npucache writes.
inline constexpr const char* kFormatName = "npucache";

inline constexpr const char* kCacheDirTag = "CACHEDIR.TAG";
inline constexpr const char* kStoreFile = "store.json";
// The cache's own settings (process/settings.h reads them).
inline constexpr const char* kCacheConfigFile = "npucache.conf";
// Where earlier versions kept the size limit (JSON): read, then replaced.
inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kStatsFile = "stats.json";
inline constexpr const char* kObjectsDir = "objects";
inline constexpr const char* kLocksDir = "locks";
// The deltas of the models' indexes: deltas/<model_info>.<n>.h5.
inline constexpr const char* kDeltasDir = "deltas";
inline constexpr const char* kStatsLock = "stats.lock";
// Held while a damaged object is replaced.
inline constexpr const char* kRepairLock = "objects.lock";
// The store lock (docs/FORMAT.md, "Lock protocol"): shared by every writer
// from its first file to its last; exclusive for gc, verify --repair and
// clear, so they never remove what a writer has stored but not yet indexed.
inline constexpr const char* kSweepLock = "sweep.lock";
// The store lock's gate: a writer passes it (shared, for an instant) before
// it takes the store lock; a sweep holds it exclusively while it waits for
// the store lock, so writers that come meanwhile wait behind the sweep
// instead of starving it.
inline constexpr const char* kSweepGate = "sweep.gate";
// Held while the markers (CACHEDIR.TAG, store.json) are created or healed.
inline constexpr const char* kStoreLock = "store.lock";
inline constexpr const char* kIndexSuffix = ".h5";
// The tuning table (no model_info ends without "_static"/"_dynamic"/"_auto" and a
// hash, so it never names an index; index_model_info() skips it).
inline constexpr const char* kTuningFile = "tuning.h5";
// Held while the tuning table is merged and rewritten.
inline constexpr const char* kTuningLock = "tuning.lock";
// The dynamic-shape profiles (automatic dynamic's decisions, seed 004's
// PGO cache), its lock, and its HDF5 view's dataset (one per model_info
// group, one line per dynamic dim).
inline constexpr const char* kProfileFile = "profiles.h5";
inline constexpr const char* kProfileLock = "profiles.lock";
inline constexpr const char* kProfileDataset = "dynamic_dims";
// Capture templates: templates/<template_key>.h5, the key naming a compiled
// program (graph key) and the sizes it was captured for; the HDF5 view's
// dataset of the task listing.
inline constexpr const char* kTemplatesDir = "templates";
// Compiled regions: regions/<region key>.h5 (region_file.h), a region's
// program shared by every method, model, layout and process that calls it.
inline constexpr const char* kRegionsDir = "regions";
inline constexpr const char* kTemplateTasksDataset = "tasks";
// Its HDF5 view: one group per runtime, one string per decision.
inline constexpr const char* kTuningDataset = "decisions";
// The whole cache of format 1 (one file); recognised to report and clear.
inline constexpr const char* kFormat1File = "cache.h5";

// HDF5 objects inside the files.
inline constexpr const char* kModuleDataset = "compiled_module";
inline constexpr const char* kGraphDataset = "graph";
inline constexpr const char* kParametersDataset = "parameters";

// "<model_info>/<func>" or "<model_info>/world<W>global_rank<R>/<func>".
std::string entry_path(const std::string& model_info, const std::string& func, int world_size, int global_rank);
// The model_info of an entry path (its first component).
std::string model_info_of(const std::string& entry_path);
// "<model_info>.h5" and "objects/<key>.h5" (the object file's name in the
// objects directory: "<key>.h5").
std::string index_file(const std::string& model_info);
std::string object_file(const std::string& graph_key);
// The model_info an index file name stands for, or "" when it is none.
std::string index_model_info(const std::string& file_name);
// "<model_info>.<n>.h5": the delta of a model's index whose first sequence
// number is n (in the deltas directory), and back: the model_info and n of
// a delta file's name ({"", 0} when it is none).
std::string delta_file(const std::string& model_info, uint64_t first);
std::pair<std::string, uint64_t> delta_of(const std::string& file_name);
// The graph key an object file name stands for, or "".
std::string object_key(const std::string& file_name);
// "templates/<key>.h5" names: the file of a stored template key, and back
// ("" when the name is none). A stored key is a template key (32 hex
// digits, the name earlier builds of this format write and read) or a
// variant's "<template key>.<16 hex digits>" (template_file.h).
std::string template_file(const std::string& template_key);
std::string template_key_of(const std::string& file_name);
bool valid_template_key(const std::string& key);
// "regions/<key>.h5" names: the file of a region key (32 hex digits), and
// back ("" when the name is none).
std::string region_file(const std::string& region_key);
std::string region_key_of(const std::string& file_name);

// Names as they may appear in a cache: model_info and func are [A-Za-z0-9_.-]
// (not starting with '.'), a graph key is 32 lowercase hex digits, an entry
// path is model_info[/world<W>global_rank<R>]/func. Bundles and index
// records are checked against this grammar before anything is written.
bool valid_name(const std::string& s);
bool valid_graph_key(const std::string& s);
bool valid_entry_path(const std::string& s);

// A temporary file for `final_name` in the same directory:
// ".<final_name>.tmp.<pid>.<n>", unique within the process.
std::string temp_name(const std::string& final_name);
// The pid of any temporary name, or -1 when `name` is not one.
long temp_owner_any(const std::string& name);

}  // namespace npucache::format::names
