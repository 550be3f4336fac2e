// What the `npucache remote` commands do (push, pull, ls), as functions
// returning plain structs; the command line parses and prints. Unlike a
// job, a command asked to use the remote fails when the remote does:
// CacheError naming the remote and the cause (a job never fails for it).
#pragma once

#include "cache/uses.h"
#include "remote/config.h"

#include <cstddef>
#include <string>
#include <vector>

namespace npucache::cache::admin {

struct RemotePush {
  std::size_t entries = 0, objects = 0;  // written
  std::size_t present = 0;               // objects the remote held already
  std::size_t skipped = 0;               // above max-object (and their entries)
  std::size_t tuning = 0;                // tuning decisions offered
  std::size_t templates = 0;             // capture templates of the objects, offered
  std::size_t profile_dims = 0;          // dynamic-shape profile dims of the models, offered
};
// Writes every entry of the cache in `dir` (of the models whose model_info
// starts with `model`, when given) and their objects to the remote.
RemotePush remote_push(const remote::Config& remote, const std::string& dir, const std::string& model);

struct RemotePull {
  std::vector<std::string> models;
  std::size_t entries = 0, objects = 0, bytes = 0;
  std::size_t tuning = 0, profile_dims = 0;  // tuning decisions and dynamic-shape dims new to the directory
  std::size_t regions = 0;                   // compiled regions new to regions/ (the objects hold them)
  std::vector<std::string> problems;         // entries left out (object missing or damaged)
  std::size_t kept_later = 0;                // entries left out: the cache's were saved later
};
// Fills the cache in `dir` with the remote's entries of the models whose
// model_info is `model` or starts with `model` + "_" (a class name), and
// their objects, checked like local files and committed like an import,
// with the shared tuning table and those models' dynamic-shape profiles
// (damaged records counted and skipped).
// Before anything is committed each object must decode with its entry's
// parameters and give its own graph key: the key of its recorded trace,
// with the entry's runtime version, decompositions and dynamic setting and
// the artifact's compile config (which must hash to the entry's config
// component), must be the key it is stored under (cache/own_key.h). An
// object that fails is counted damaged (removed where the remote may be
// written) and its entries are reported in `problems`, never committed.
// Not checked, for want of a trace: which method an entry belongs to. An
// entry edited to name another method's honest object of the same model
// is pulled; a start in the default hit check misses it (its trace gives
// another key), the code_version fast path would serve it: pull only from
// a remote whose every writer is trusted when using that path.
RemotePull remote_pull(const remote::Config& remote, const std::string& model, const std::string& dir);

struct RemoteListedEntry {
  std::string path, graph_key, object_hash, mode;
  std::size_t object_bytes = 0;  // of the object's value (0: missing)
};
struct RemoteListedModel {
  std::string model_info;
  std::vector<RemoteListedEntry> entries;
  std::size_t objects = 0, bytes = 0;  // distinct objects and their bytes
};
// The remote's models (all, or those matching `model` as for pull), each
// with its entries and sizes.
std::vector<RemoteListedModel> remote_ls(const remote::Config& remote, const std::string& model);

// One server of the remote (each shard of a tier of several; the remote
// itself otherwise): reachable or its failure, how many of the cache's
// keys it holds, and the objects of `listed` (remote_ls) it holds.
struct RemoteListedShard {
  std::string url;      // as shown
  std::string failure;  // empty: reachable; else the failure's kind and what was said
  std::size_t keys = 0, objects = 0, bytes = 0;
};
std::vector<RemoteListedShard> remote_shards(const remote::Config& remote,
                                             const std::vector<RemoteListedModel>& listed);
struct RemoteKeygen {
  std::string secret_file, public_file;  // DIR/signing.key (0600), DIR/signing.pub
  std::string public_key, key_id;        // "ed25519:<hex>" and its id
};
// A new signing key for signed publishing in `dir` (made 0700 when
// missing); ConfigError when `dir` holds a signing.key already (never
// replaced) or a file cannot be written.
RemoteKeygen remote_keygen(const std::string& dir);

}  // namespace npucache::cache::admin
