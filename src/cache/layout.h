// Every name npucache gives a file, a directory or an HDF5 object of a cache
// directory, and the cache format version: nobody else spells them
// (docs/FORMAT.md describes them).
#pragma once

#include <filesystem>
#include <string>

namespace npucache::cache::layout {

// Bump when the stored layout or serialization changes incompatibly; an
// entry of another format version is stale.
inline constexpr const char* kFormatVersion = "1";
// The `producer` attribute of every file npucache writes.
inline constexpr const char* kProducer = "npucache";

// Files of a cache directory.
inline constexpr const char* kCacheFile = "cache.h5";
inline constexpr const char* kStatsFile = "stats.json";
inline constexpr const char* kLockFile = ".lock";

// HDF5 objects of cache.h5.
inline constexpr const char* kObjectsGroup = "/objects";
inline constexpr const char* kModuleDataset = "compiled_module";
inline constexpr const char* kGraphDataset = "graph";
inline constexpr const char* kParametersDataset = "parameters";

// "<model_info>/<func>" or "<model_info>/world<W>global_rank<R>/<func>".
std::string entry_path(const std::string& model_info, const std::string& func, int world_size, int global_rank);
// The HDF5 path of an entry ("/<entry path>") and of an object.
std::string h5_entry(const std::string& entry_path);
std::string h5_object(const std::string& graph_key);

// A temporary file for `final_name` in the same directory:
// ".<final_name>.tmp.<pid>.<n>", unique within the process.
std::string temp_name(const std::string& final_name);
// The pid of a temporary name of `final_name`, or -1 when `name` is not one.
long temp_owner(const std::string& name, const std::string& final_name);

}  // namespace npucache::cache::layout
