// The HDF5 compile-cache store of one cache directory (docs/FORMAT.md).
//
// Everything lives in <dir>/cache.h5: content-addressed objects under
// /objects/<graph_key>, and entries at the seed's paths
// /<model_info>/[world<W>global_rank<R>/]<func>, whose compiled_module is a
// hard link to their object's dataset (bytes stored once).
//
// Writes are transactions: under an exclusive lock (<dir>/.lock) the
// current file is copied to a temporary file (AtomicFile), changed,
// flushed, fsynced and renamed over cache.h5. A process killed at any
// instant leaves the previous file or the new one, never a partial one;
// readers (which never lock) see one or the other. Concurrent writers
// serialise on the lock and each re-reads the latest file, so no entry is
// lost.
//
// Security (TorchAir's rule): files are created 0600 and directories 0700;
// opening refuses a cache.h5 that is a symlink or is not owned by the
// current user, with CacheRefused saying why.
//
// Records are typed (records.h); only this file converts them to and from
// HDF5 attributes.
#pragma once

#include "cache/records.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::cache {

class Hdf5Store {
 public:
  // Creates the directory (0700) when missing.
  explicit Hdf5Store(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path file() const;
  bool exists() const;

  // A read view of the current file (one open; cheap to query repeatedly).
  class Reader {
   public:
    ~Reader();
    Reader(Reader&&) noexcept;
    std::optional<EntryRecord> entry(const std::string& path) const;
    std::vector<EntryRecord> entries() const;
    bool has_object(const std::string& graph_key) const;
    // Throws CacheError when missing or when the bytes fail the checksum.
    // `with_text` false skips the graph's readable text (not needed to run).
    ObjectRecord object(const std::string& graph_key, bool with_text = true) const;
    std::vector<std::string> objects() const;
    std::size_t stored_bytes(const std::string& graph_key) const;

   private:
    friend class Hdf5Store;
    struct Impl;
    explicit Reader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  // nullopt when the cache has no file yet.
  std::optional<Reader> reader() const;
  // A reader shared within the process while cache.h5 stays the same file
  // (same inode and modification time): a warm start of several methods
  // opens the file once. nullptr when the cache has no file yet.
  std::shared_ptr<const Reader> shared_reader() const;

  struct Transaction {
    std::vector<ObjectRecord> objects;       // written unless already present
    std::vector<EntryRecord> entries;        // replace any entry at the same path
    std::vector<std::string> remove_entries;
    bool drop_unreferenced_objects = false;  // also rewrites the file compactly
  };
  void commit(const Transaction& t);
  // Removes cache.h5 and leftover temporary files.
  void clear();

 private:
  void check_file_safety() const;
  std::filesystem::path dir_;
};

}  // namespace npucache::cache
