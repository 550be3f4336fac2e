#include "storage/object_source.h"

#include <npucache/error.h>

#include "format/cache_error.h"
#include "log/log.h"
#include "storage/remote_tier.h"

namespace npucache::storage {

LocalObjects::LocalObjects(Store store, Check integrity) : store_(std::move(store)), integrity_(std::move(integrity)) {}

std::string LocalObjects::where() const { return "the cache " + store_.directory().path().string(); }

bool LocalObjects::holds(const std::string& graph_key) const {
  try {
    return store_.has_object(graph_key);
  } catch (const CacheError&) {
    return false;
  }
}

std::optional<ObjectRecord> LocalObjects::read(const std::string& graph_key, const Check& check) const {
  try {
    if (!store_.has_object(graph_key)) return std::nullopt;
    ObjectRecord o = store_.object(graph_key, true);
    try {
      if (check) check(o);
    } catch (const CacheRefused&) {
      throw;
    } catch (const CacheError& e) {
      discard_damaged(graph_key, e.what());
      return std::nullopt;
    }
    return o;
  } catch (const CacheRefused&) {
    throw;
  } catch (const CacheError& e) {
    log::warn("stored object {} is unusable ({}); compiling", graph_key, e.what());
    return std::nullopt;
  } catch (const TraceError& e) {
    log::warn("stored object {} does not bind this call ({}); compiling", graph_key, e.what());
    return std::nullopt;
  }
}

void LocalObjects::discard_damaged(const std::string& key, const std::string& why) const {
  log::warn("{}; removing it so it is rebuilt", why);
  try {
    const Writing held = store_.writing();
    // Only if it is still unusable: another process may have replaced it.
    const auto seen = store_.object_stat(key);
    if (!seen) return;
    try {
      integrity_(store_.object(key, false));
      return;
    } catch (const CacheRefused&) {
      throw;
    } catch (const IoError& e) {
      log::warn("object {} is kept: {}", key, e.what());  // unread, not damaged
      return;
    } catch (const Error&) {
    }
    store_.remove_damaged_object(key, *seen, held);
  } catch (const CacheError& e) {
    log::warn("could not remove damaged object {}: {}", key, e.what());
  }
}

RemoteObjects::RemoteObjects(std::shared_ptr<RemoteTier> tier, std::string dir)
    : tier_(std::move(tier)), dir_(std::move(dir)) {}

std::string RemoteObjects::where() const { return "the remote cache " + tier_->config().url; }

std::optional<ObjectRecord> RemoteObjects::read(const std::string& graph_key, const Check& check) const {
  auto got = tier_->object(graph_key, dir_, check);
  if (!got) return std::nullopt;
  return std::move(got->record);
}

std::optional<ObjectRecord> RemoteObjects::read_named(const std::string& hash, const std::string& graph_key,
                                                      const Check& check) const {
  auto got = hash.empty() ? tier_->object(graph_key, dir_, check) : tier_->object_by_hash(hash, graph_key, dir_, check);
  if (!got) return std::nullopt;
  return std::move(got->record);
}

bool RemoteObjects::holds(const std::string& graph_key) const {
  const auto m = tier_->measure({graph_key}, dir_);  // the seam has no existence call: one get
  return m && !m->empty() && m->front().value_bytes > 0;
}

}  // namespace npucache::storage
