// The mix-up rule: a stored artifact serves only the computation its own
// trace names. An object's graph key is a claim of its writer (an unsigned
// remote value is resealed by anyone who can write the remote: every check
// sum in it is one the writer computes), so a reader derives the key
// itself, from the artifact's recorded trace and the caller's key inputs
// (format's graph_id), and compares it with the key the object is stored
// and asked for under. Another method's honest object under this key (its
// graph key rewritten, the value resealed) fails; a crafted program paired
// with an honest trace does not (the artifact holds both, and nothing but
// a signature ties them).
//
// Errors: check_own_key throws CacheError naming both keys: the object is
// damaged (counted, removed where the tier may write, never committed,
// rebuilt).
#pragma once

#include "cache/uses.h"
#include "compiler/compiled_graph.h"
#include "format/keys.h"
#include "format/records.h"

#include <string>

namespace npucache::cache {

// Throws CacheError unless `g` was compiled with `in`'s config and the
// graph key of its own trace, with `in`, equals `graph_key` (the key the
// object was read under).
void check_own_key(const compiler::CompiledGraph& g, const std::string& graph_key, const KeyInputs& in);

// The key inputs graph_id reads, rebuilt from an entry's components and the
// artifact's own compile config (for a reader that traced nothing: remote
// pull, import). Throws CacheError when the entry's config hash is not the
// artifact's. Only config, runtime version, decompositions and dynamic are
// set (no module, method or code_version: graph_id does not read them).
KeyInputs key_inputs_of(const EntryRecord& e, const compiler::CompiledGraph& g);

}  // namespace npucache::cache
