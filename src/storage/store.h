// The store of one cache directory (docs/FORMAT.md).
//
// One file per unique artifact, content-addressed by graph key,
// objects/<graph_key>.h5, written once (temporary + link: the first writer
// of a key wins) and never changed; a writer that finds its key stored
// adopts the stored bytes. One index per model: a base, <model_info>.h5,
// and deltas, deltas/<model_info>.<n>.h5, with that model's entries; a
// commit writes a delta of what it changes into the index of its model
// (under that index's lock; a new base, amortised, when the deltas grow)
// and adds only its new objects, so its cost grows neither with the cache
// nor with the model, and writers of different models never wait on each
// other. Readers take no lock: they merge the base and its deltas as one
// state (store.cpp).
//
// Everything read is validated (envelope.h): a damaged object is reported,
// removed and rebuilt by its next writer; a damaged index is salvaged (its
// readable entries kept) when next written. Files are created exclusively
// without following links, directories 0700, files 0600; an unsafe
// directory or a file that is a link or owned by someone else is refused
// (CacheRefused).
//
// Thread safety: a Store may be used from several threads (HDF5 calls are
// serialised); processes coordinate through the file system alone.
#pragma once

#include "format/index_file.h"
#include "format/records.h"
#include "storage/dir.h"
#include "storage/uses.h"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace npucache::storage {

// A hold of the store lock, locks/sweep.lock: shared (Writing) or
// exclusive (Sweeping); released when destroyed. Made only by Store, so a
// method that takes one is called only under the protocol.
class StoreLock {
 public:
  bool exclusive() const { return exclusive_; }
  StoreLock(StoreLock&&) noexcept;
  StoreLock& operator=(StoreLock&&) = delete;
  ~StoreLock();

 protected:
  StoreLock(FileLock lock, bool exclusive, std::string dir);

 private:
  FileLock lock_;
  bool exclusive_;
  std::string dir_;  // "" once moved from
};
class Writing final : public StoreLock {
  friend class Store;
  using StoreLock::StoreLock;
};
class Sweeping final : public StoreLock {
  friend class Store;
  using StoreLock::StoreLock;
};

// The store lock was not free in time; nothing was changed.
class CacheBusy : public CacheError {
 public:
  using CacheError::CacheError;
};

// How long a writer waits for a sweep (gc, verify --repair, clear) to end;
// how long an administration command waits for the store lock by default
// (`--wait`); how long the size limit's gc after a save waits (busy: the
// next save tries again).
inline constexpr double kWriterWaitSeconds = 120;
inline constexpr double kAdminWaitSeconds = 30;
inline constexpr double kLimitWaitSeconds = 2;

class Store {
 public:
  // Create::yes creates the directory (0700) and its marker files (once
  // per process and directory). Every open checks the path as a fresh
  // process would (owner, mode, links of the directory and its parents):
  // a directory removed, replaced, chmod-ed or replaced by a link since the
  // process last opened it is judged anew, never reused blindly.
  static Store open(const std::filesystem::path& dir, Create create);
  const std::filesystem::path& dir() const { return dir_.path(); }
  // The store's identity: the id its marker file (store.json) names, with
  // the directory's device and inode. Ranks that report the same identity
  // use the same directory, on one host or across a shared file system;
  // node-local directories of the same path on different hosts differ.
  // A store.json removed since the store was opened (a `clear` beside a
  // running job) is made again, a damaged one healed (a new id).
  std::string identity() const;
  // identity() as a dry run predicts it, writing nothing: the same
  // identity when store.json is intact; when identity() would heal it (a
  // new id, the same for every user of the directory), "healed:" with the
  // device and inode. Throws CacheError when the directory cannot be
  // written, as open(Create::yes) would in writing its markers.
  std::string predicted_identity() const;
  const Dir& directory() const { return dir_; }
  // Removes the temporaries of crashed writers (their process is gone) in
  // the store's directory, objects/ and deltas/; returns how many.
  std::size_t remove_stale_temps() const;

  // --- Reading -------------------------------------------------------------
  // The entry at `path` (nullopt when its model has no index or the index
  // no such entry). A damaged index whose record of the entry cannot be
  // read is a CacheError.
  std::optional<EntryRecord> entry(const std::string& path) const;
  // The readable part of a model's index (nullopt when there is none).
  // Throws CacheError when nothing of it can be trusted.
  std::optional<DecodedIndex> index(const std::string& model_info) const;
  // The same under a sweep: decoded from the bytes the file holds now,
  // never a decoding its stat alone vouches for (a clock or a file system
  // that reuses inodes can make a rewritten file look unchanged, and a
  // sweep removes what no entry it reads names).
  std::optional<DecodedIndex> index(const std::string& model_info, const Sweeping& held) const;
  std::vector<std::string> model_infos() const;
  bool has_object(const std::string& graph_key) const;
  // Throws CacheError naming the file and what is wrong (missing, damaged).
  ObjectRecord object(const std::string& graph_key, bool with_text = true) const;
  // The object's facts without its bytes.
  ObjectMeta object_meta(const std::string& graph_key) const;
  std::vector<std::string> object_keys() const;
  // The object file's identity (nullopt when there is none).
  std::optional<Dir::Info> object_stat(const std::string& graph_key) const;
  std::filesystem::path object_path(const std::string& graph_key) const;
  std::filesystem::path index_path(const std::string& model_info) const;

  // --- Writing -------------------------------------------------------------
  // The store lock, locks/sweep.lock (docs/FORMAT.md, "Lock protocol").
  // writing(): shared, held by every writer from its first file to its last
  // (a commit, a template, a heal), so writers never wait on each other;
  // waits at most `wait_s` for a sweep to end, then throws CacheBusy (the save is reported, the method runs uncached).
  // sweeping(): exclusive, held by whatever removes files another process
  // may use (gc, verify --repair, clear); throws CacheError saying who holds
  // it (CacheBusy) when it is not free within `wait_s`, before anything is
  // changed.
  // Every method below that changes the store takes one of them.
  Writing writing(double wait_s = kWriterWaitSeconds) const;
  Sweeping sweeping(double wait_s) const;
  std::optional<Sweeping> try_sweeping(double wait_s) const;
  struct Put {
    ObjectRecord stored;   // what the store holds for the key now
    bool adopted = false;  // another writer's bytes were there first
  };
  // `usable` (may be empty) checks a stored object beyond its checksums
  // (that it decodes); one that fails is replaced like a damaged one.
  using Check = std::function<void(const ObjectRecord&)>;
  Put put_object(const ObjectRecord& o, const StoreLock& held, const Check& usable = {}) const;
  // The one commit procedure: what the single process, the coordinator's
  // store writers and `import` write goes through it. Under the writing
  // lock, each object is published unless its key is stored already (then
  // the stored bytes are adopted, checked with `usable`; damaged ones are
  // replaced); every entry then records the checksum and program flag of
  // the bytes the store keeps for its graph key. An entry whose object is
  // not in `objects` names one the writer found stored: it is committed
  // only when that object is still there under the lock (pinned: no sweep
  // can remove it before the index names it), else its object is published
  // again from `pinned` when the writer holds it, else the entry is left
  // out (`unpinned`, with a warning). Each model's index is updated once.
  // The objects keep the producer they carry. With `keep_later` (an
  // import, a pull: another cache's entries), an entry the index holds that
  // was saved after the one committed for its path is kept, and the
  // committed one left out (`kept_later`): a fill never replaces what a job
  // saved since. Throws CacheError
  // (CacheRefused for an unsafe directory); nothing of an index is written
  // before its objects are.
  struct Commit {
    std::vector<ObjectRecord> objects;
    std::vector<EntryRecord> entries;
    std::vector<ObjectRecord> pinned;  // stored objects the entries reuse, as the writer read them
    bool keep_later = false;           // keep an entry of the index saved after the committed one
  };
  struct Committed {
    std::map<std::string, ObjectRecord> kept;  // by graph key: what the store holds for each object committed
    std::set<std::string> adopted;             // keys whose kept bytes are another writer's
    std::vector<EntryRecord> entries;          // as written to the indexes
    std::vector<std::string> unpinned;         // entries left out: their object was removed and not held
    std::vector<std::string> kept_later;       // keep_later: entries left out, the index's being later
  };
  Committed commit(Commit c, const Check& usable = {}) const;
  // The same under `held`, a writing lock the caller took (and keeps for
  // what it does after the commit): a second writing() of one process
  // would queue behind a waiting sweep that waits for the first.
  Committed commit(Commit c, const Writing& held, const Check& usable = {}) const;
  // Under the model's index lock: entries `put` added or replaced, `remove`
  // removed; a damaged index is salvaged into the new one. Returns the
  // number of entries the index lost to damage (0 normally). With
  // `kept_later`, an entry of `put` whose path the index holds with a later
  // save date is not put; its path is appended there.
  std::size_t update_index(const std::string& model_info, const Components& model, const std::vector<EntryRecord>& put,
                           const std::vector<std::string>& remove, const StoreLock& held,
                           std::vector<std::string>* kept_later = nullptr) const;
  // The same under a writing lock of its own.
  std::size_t update_index(const std::string& model_info, const Components& model, const std::vector<EntryRecord>& put,
                           const std::vector<std::string>& remove) const;
  // Whether the model's index, as last read, has damaged records or a
  // damaged HDF5 view (then heal_index rewrites it).
  bool index_damaged(const std::string& model_info) const;
  // The marker files (CACHEDIR.TAG, store.json) as they should be: "" or
  // what is wrong with them.
  std::string check_markers() const;
  // Rewrites damaged markers (a damaged store.json gets a new id).
  void heal_markers() const;
  // Rewrites a model's index from its readable entries (under a writing
  // lock of its own).
  void heal_index(const std::string& model_info) const;
  // Removes a whole index (cache administration).
  void remove_index(const std::string& model_info, const Sweeping& held) const;
  // Removes an object file (cache administration).
  void remove_object(const std::string& graph_key, const Sweeping& held) const;
  // Removes a damaged object file, only while the file is still `seen`
  // (another writer may have replaced it) and under objects.lock.
  void remove_damaged_object(const std::string& graph_key, const Dir::Info& seen, const StoreLock& held) const;

 private:
  explicit Store(Dir dir) : dir_(std::move(dir)) {}
  // Writes the markers of a store opened to write, once per process and
  // directory.
  void mark() const;
  Dir objects(Create create) const;
  // Removes the model's delta files (under its index lock).
  void remove_deltas(const std::string& model_info) const;
  Dir dir_;
};

}  // namespace npucache::storage
