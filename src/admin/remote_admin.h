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
  std::vector<std::string> problems;  // entries left out (object missing or damaged)
};
// Fills the cache in `dir` with the remote's entries of the models whose
// model_info is `model` or starts with `model` + "_" (a class name), and
// their objects, checked like local files and committed like an import.
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

struct RemoteKeygen {
  std::string secret_file, public_file;  // DIR/signing.key (0600), DIR/signing.pub
  std::string public_key, key_id;        // "ed25519:<hex>" and its id
};
// A new signing key for signed publishing in `dir` (made 0700 when
// missing); ConfigError when `dir` holds a signing.key already (never
// replaced) or a file cannot be written.
RemoteKeygen remote_keygen(const std::string& dir);

}  // namespace npucache::cache::admin
