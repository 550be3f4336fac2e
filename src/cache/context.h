// What a cache user needs for one cached method: the cache directory, who
// is writing, the key inputs, the lookup key and the entry path; and the
// local lookup shared by cache_compile and the MPI coordinator.
#pragma once

#include <npucache/cache.h>

#include "cache/artifact.h"
#include "cache/keys.h"
#include "cache/records.h"
#include "cache/store.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::cache {

struct CacheContext {
  std::string dir;
  Producer who;
  KeyInputs key_inputs;
  LookupKey key;
  std::string path;  // the entry path
  std::string method;
  bool dynamic = true;
  std::shared_ptr<const DecompositionTable> decompositions;

  // <dir>/<entry path>, the seed's path, for messages.
  std::string where() const;
};

// Resolves the cache directory and ranks (from MPI / the current
// communicator when not given) and computes the lookup key.
// `store_program` forces the compiled program into stored artifacts.
CacheContext make_context(const nn::Module& module, const CacheOptions& options, const CompilerConfig& config,
                          bool store_program);

struct LocalLookup {
  std::shared_ptr<compiler::CompiledGraph> graph;  // set on a hit
  std::optional<EntryRecord> entry;
  std::optional<ObjectRecord> object;
  std::string miss_reason;                 // "absent", "stale", "corrupt", "signature", "refused"
  std::vector<std::string> differences;    // stale components or the error
};

// Looks the entry up in the context's store, checks its key components,
// reads, verifies and decodes its object, binds the call's inputs and (for
// objects without a program) recompiles the program. Logs the seed's
// "loaded from" line on a hit, the reason on a miss; records statistics.
LocalLookup lookup_local(const CacheContext& c, const FlatArgs& args);

// Whether the context's store holds the object `graph_key` (false when the
// store cannot be read).
bool store_holds(const CacheContext& c, const std::string& graph_key);

}  // namespace npucache::cache
