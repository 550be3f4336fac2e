// The remote tier: a remote store (a Redis server, a shared directory)
// behind the local store, shared by every host of a fleet (docs/GUIDE.md,
// "The remote tier"; the keys and values are remote_value.h's). The backend
// (remote/backend.h) knows only keys and bytes; this class decides what is
// stored and checks everything it reads: an object's value must hash to
// the content hash its entry names (when it names one), its header,
// record, graph key, size and checksum must hold, and the caller's `check`
// (decoding and validating the program, as for a local file) must pass
// before it counts as a hit. A warm read is one get: the object by its
// graph key, or an entry by its path and then its object.
//
// A remote that fails never fails a job: every call answers nothing (a
// miss) when the remote is refused, slow, full, behind a wrong password,
// drops the connection, holds a damaged value or (with trusted keys, the
// backend's check: remote/signed_backend.h) a value no trusted key signed,
// which is left in place (a table's record so refused is skipped, the
// others read); the failure is counted by kind in the cache directory's
// statistics (stats.h, `npucache stats`) and warned about once per process
// and kind, naming the cause. A connection
// failure makes the backend skip the remote for the rest of the process; a
// full remote stops the writes, reads go on. Of a tier of several servers
// (shards, remote/sharded_backend.h) only the failed shard's keys are
// misses, its writes stop when it is full, and its failures are counted
// under its name too. Without a configured remote
// there is no tier (get() returns null): no connection, no cost.
//
// Thread safety: a tier may be used from several threads.
#pragma once

#include "compiler/tuning_table.h"
#include "format/records.h"
#include "format/remote_value.h"
#include "process/dry_run.h"
#include "remote/backend.h"
#include "storage/stats.h"
#include "storage/uses.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::storage {

class RemoteTier {
 public:
  // The process's tier for `config` (one per URL and settings, so one
  // connection), or null when no remote is configured.
  static std::shared_ptr<RemoteTier> get(const remote::Config& config);
  // A tier over any backend (tests, benchmarks).
  explicit RemoteTier(std::unique_ptr<remote::Backend> backend);

  const remote::Config& config() const { return backend_->config(); }
  remote::Backend& backend() { return *backend_; }
  // Whether every value read was verified against a trusted signing key
  // (remote::Backend::authenticated): an unsigned entry is only a claim,
  // which the code_version fast path does not take.
  bool authenticated() const { return backend_->authenticated(); }
  // Not read-only, and no write found the remote full; never in a dry run
  // (process/dry_run.h), which only reads what a job would.
  bool can_write() const { return !process::dry_run() && !config().read_only && !full_.load(); }

  struct Object {
    ObjectRecord record;
    std::string hash;  // the content hash its entry named and its value has (empty: read by graph key)
    std::size_t value_bytes = 0;
  };
  using Check = std::function<void(const ObjectRecord&)>;
  // The object stored for `graph_key` (one get), every check passed,
  // `check` included (which throws CacheError or TraceError to reject it);
  // nullopt otherwise. Counted in `dir`'s stats.
  std::optional<Object> object(const std::string& graph_key, const std::string& dir, const Check& check = {});
  // The same when an entry named the object's content hash `hash`: a value
  // of another hash (the object was written again since the entry) is a
  // miss.
  std::optional<Object> object_by_hash(const std::string& hash, const std::string& graph_key, const std::string& dir,
                                       const Check& check = {});
  // The entry at `path` (one get).
  std::optional<RemoteEntry> entry(const std::string& path, const std::string& dir);
  // Every readable entry of a model (damaged records are counted and
  // skipped); nullopt when the remote failed. Lists keys (administration).
  std::optional<std::vector<RemoteEntry>> entries(const std::string& model_info, const std::string& dir);
  // The models with entries; nullopt when the remote failed. Lists keys.
  std::optional<std::vector<std::string>> models(const std::string& dir);
  // What the remote holds for each graph key: the content hash and bytes of
  // its value (empty and 0: none), read in small batches; nullopt when the
  // remote failed. The seam has no size call: `npucache remote ls` reads
  // what a pull would read, and nothing else needs sizes.
  struct Measured {
    std::string hash;
    std::size_t value_bytes = 0;
  };
  std::optional<std::vector<Measured>> measure(const std::vector<std::string>& graph_keys, const std::string& dir);

  struct Pushed {
    std::size_t objects = 0, entries = 0;  // written (objects already there are not counted)
    std::size_t present = 0;               // objects the remote held already
    std::size_t skipped = 0;               // objects above max-object, and entries of objects not stored
    bool failed = false;                   // the remote failed (counted, warned)
  };
  // Writes each object (unless the remote holds its graph key: written
  // once, the first writer's is kept), then the entries (replaced), each
  // naming its object's content hash when this call wrote the object.
  // Objects above max-object are not sent, nor entries whose object was
  // skipped here. Nothing when the tier cannot write.
  Pushed push(const std::vector<ObjectRecord>& objects, const std::vector<EntryRecord>& entries,
              const std::string& dir);

  // The shared tuning table's decisions (a blob kind), and adding this
  // process's (a decision already there is kept).
  std::vector<compiler::TuningRecord> tuning(const std::string& dir);
  void push_tuning(const std::vector<compiler::TuningRecord>& records, const std::string& dir);

  // One record of a shared table (nullopt: absent, or the remote failed),
  // every record of one whose name starts with `name_prefix` (a listing),
  // and adding records (`overwrite`: replace one of the same name). The
  // caller decodes and checks the records' bytes.
  std::optional<std::string> blob(BlobKind kind, const std::string& name, const std::string& dir);
  std::vector<std::pair<std::string, std::string>> blobs(BlobKind kind, const std::string& dir,
                                                         const std::string& name_prefix = "");
  void push_blobs(BlobKind kind, const std::vector<std::pair<std::string, std::string>>& records,
                  remote::Overwrite overwrite, const std::string& dir);

  // Records (and warns once per process and kind about) a failure; a
  // shard's (Fault::shard) under its name too, and a skipped call
  // (Fault::repeated) as kSkipped of its shard.
  void failed(const remote::Fault& f, const std::string& dir, const std::string& during);
  static constexpr std::string_view kSkipped = "skipped";

 private:
  // Reads an object's value and checks it (verify).
  std::optional<Object> fetch(const std::string& hash, const std::string& graph_key, const std::string& dir,
                              const Check& check);
  // Checks an object's value against `hash` (when not empty), then `check`;
  // counts the hit, the miss or the damage (a damaged value is removed).
  std::optional<Object> verify(std::string value, const std::string& hash, const std::string& graph_key,
                               const std::string& dir, const Check& check);
  // The values of every key starting with `prefix`, by the rest of the key;
  // nullopt when the remote failed (counted, warned as `during`).
  // Counts the failures the backend answered around (a failed shard's keys
  // left out of a listing).
  void partial_faults(const std::string& dir, const std::string& during);
  std::optional<std::vector<std::pair<std::string, std::string>>> table(const std::string& prefix,
                                                                        const std::string& dir,
                                                                        const std::string& during);
  std::unique_ptr<remote::Backend> backend_;
  std::atomic<bool> full_{false};
};

}  // namespace npucache::storage
