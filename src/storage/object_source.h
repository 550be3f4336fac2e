// Where a stored program's bytes come from, behind one interface: a graph
// key to its object record, checked. The local store and the remote tier
// are two sources of it (ccache's shape: storage knows key -> bytes); the
// caller (cache/method_cache.h) decodes and binds what either gives, the
// same way.
//
// A source's answer is the object, every check passed, or nothing: an
// object that is absent, unreadable, damaged or rejected by the caller's
// check is nothing, and never an exception (a refused directory is the
// one exception: CacheRefused, which the caller reports once). A damaged
// local object is removed (if it is still damaged) so it is rebuilt; a
// damaged remote value is counted (remote_tier.h).
//
// Thread safety: a source may be read from several threads.
#pragma once

#include "format/records.h"
#include "storage/store.h"
#include "storage/uses.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace npucache::storage {

class RemoteTier;

class ObjectSource {
 public:
  // Rejects an object by throwing CacheError (damaged, undecodable) or
  // TraceError (it does not fit the caller).
  using Check = std::function<void(const ObjectRecord&)>;
  virtual ~ObjectSource() = default;
  // The object stored for `graph_key`, `check` passed; nullopt otherwise.
  virtual std::optional<ObjectRecord> read(const std::string& graph_key, const Check& check) const = 0;
  // Whether the source holds `graph_key` (false when it cannot tell). The
  // remote answers with a read of the value: a plan asks the local store.
  virtual bool holds(const std::string& graph_key) const = 0;
  // For messages: "the cache DIR", "the remote cache URL".
  virtual std::string where() const = 0;
};

// The local store's objects. `integrity` says whether an object is damaged
// (it throws CacheError when it is): an object the caller's check rejects
// as damaged is removed only if `integrity` still rejects it on a fresh
// read under the store lock (another process may have replaced it).
class LocalObjects final : public ObjectSource {
 public:
  LocalObjects(Store store, Check integrity);
  std::optional<ObjectRecord> read(const std::string& graph_key, const Check& check) const override;
  bool holds(const std::string& graph_key) const override;
  std::string where() const override;
  // Removes `key`'s object if it still fails `integrity`.
  void discard_damaged(const std::string& key, const std::string& why) const;

 private:
  Store store_;
  Check integrity_;
};

// The remote tier's objects, counted in `dir`'s statistics.
class RemoteObjects final : public ObjectSource {
 public:
  RemoteObjects(std::shared_ptr<RemoteTier> tier, std::string dir);
  std::optional<ObjectRecord> read(const std::string& graph_key, const Check& check) const override;
  bool holds(const std::string& graph_key) const override;
  std::string where() const override;
  // The object an index entry named by its content hash.
  std::optional<ObjectRecord> read_named(const std::string& hash, const std::string& graph_key,
                                         const Check& check) const;

 private:
  std::shared_ptr<RemoteTier> tier_;
  std::string dir_;
};

}  // namespace npucache::storage
