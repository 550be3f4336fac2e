#include "storage/regions.h"

#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "log/log.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace npucache::storage {
namespace {

std::optional<Dir> regions_dir(const Store& s, Create create) {
  if (create == Create::no && !s.directory().stat(names::kRegionsDir)) return std::nullopt;
  return s.directory().sub(names::kRegionsDir, create);
}

// The file's region, checked against the name it is read under.
format::RegionRecord checked(const std::string& bytes, const std::string& key, const std::string& what) {
  format::RegionRecord r = format::decode_region_file(bytes, what);
  if (format::region_key(r.validity) != key)
    throw CacheError(what + " is damaged: its name is not its content's key (another region, config or runtime)");
  return r;
}

void touch(const Dir& d, const std::string& name) {
  if (::utimensat(d.fd(), name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) != 0)
    log::debug("compiled region {} not marked used: {}", name, std::strerror(errno));
}

}  // namespace

std::optional<format::RegionRecord> read_region(const Store& s, const std::string& key, bool mark_used) {
  if (!names::valid_graph_key(key)) throw ConfigError("a region key is 32 hex digits, got '" + key + "'");
  const auto d = regions_dir(s, Create::no);
  if (!d) return std::nullopt;
  const std::string name = names::region_file(key);
  const auto bytes = d->read(name, format::kMaxRegionFileBytes);
  if (!bytes) return std::nullopt;
  format::RegionRecord r = checked(*bytes, key, (d->path() / name).string());
  if (mark_used) touch(*d, name);
  return r;
}

std::optional<std::string> region_file_bytes(const Store& s, const std::string& key) {
  if (!names::valid_graph_key(key)) throw ConfigError("a region key is 32 hex digits, got '" + key + "'");
  const auto d = regions_dir(s, Create::no);
  if (!d) return std::nullopt;
  return d->read(names::region_file(key), format::kMaxRegionFileBytes);
}

bool has_region(const Store& s, const std::string& key) {
  if (!names::valid_graph_key(key)) throw ConfigError("a region key is 32 hex digits, got '" + key + "'");
  const auto d = regions_dir(s, Create::no);
  return d && d->stat(names::region_file(key)).has_value();
}

bool put_region(const Store& s, const std::string& key, const std::string& file_bytes, const StoreLock&, bool replace) {
  if (!names::valid_graph_key(key)) throw ConfigError("a region key is 32 hex digits, got '" + key + "'");
  const Dir d = *regions_dir(s, Create::yes);
  const std::string name = names::region_file(key);
  checked(file_bytes, key, "the region to store as " + name);
  if (d.publish(name, file_bytes)) return true;
  if (replace) {
    d.write(name, file_bytes);
    return true;
  }
  // One is there: kept when valid (the first writer's), else replaced.
  try {
    if (const auto bytes = d.read(name, format::kMaxRegionFileBytes)) {
      checked(*bytes, key, (d.path() / name).string());
      return false;
    }
  } catch (const CacheRefused&) {
    throw;
  } catch (const CacheError& e) {
    log::warn("{}; replacing it", e.what());
  }
  d.write(name, file_bytes);
  return true;
}

std::vector<StoredRegion> stored_regions(const Store& s, bool decode) {
  std::vector<StoredRegion> out;
  const auto d = regions_dir(s, Create::no);
  if (!d) return out;
  for (const auto& name : d->list()) {
    const std::string key = names::region_key_of(name);
    if (key.empty()) continue;
    const auto info = d->stat(name);
    if (!info || !info->regular) continue;
    StoredRegion r;
    r.key = key;
    r.path = (d->path() / name).string();
    r.bytes = static_cast<std::size_t>(info->size);
    r.mtime_ns = info->mtime_ns;
    const auto head = d->head(name, 8);
    if (!head) continue;
    if (!format::has_magic(format::EnvelopeKind::compiled_region, *head)) {
      r.ours = false;
      r.damage = r.path + " is not an npucache compiled region (or its header is damaged)";
      out.push_back(std::move(r));
      continue;
    }
    if (decode) {
      try {
        const auto bytes = d->read(name, format::kMaxRegionFileBytes);
        if (!bytes) continue;
        r.validity = checked(*bytes, key, r.path).validity;
      } catch (const CacheRefused&) {
        throw;
      } catch (const format::OtherFormat& e) {
        r.other_format = e.what();
      } catch (const format::StaleFormat& e) {
        r.stale = e.what();
      } catch (const IoError& e) {  // unknown, not damaged
        r.unread = e.what();
      } catch (const CacheError& e) {
        r.damage = e.what();
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

void remove_region(const Store& s, const std::string& key, const Sweeping&) {
  if (const auto d = regions_dir(s, Create::no)) d->remove(names::region_file(key));
}

std::vector<std::string> sweep_regions(const Store& s, const std::vector<StoredRegion>& decoded,
                                       std::optional<double> max_age_s, double now_s, const Sweeping* held) {
  const bool dry_run = held == nullptr;
  std::vector<std::string> removed;
  const auto d = regions_dir(s, Create::no);
  if (!d) return removed;
  for (const auto& r : decoded) {
    if (!r.ours) continue;
    const double age = now_s - static_cast<double>(r.mtime_ns) / 1e9;
    if (r.damage.empty() && !(max_age_s && age > *max_age_s)) continue;
    if (!dry_run) d->remove(names::region_file(r.key));
    removed.push_back(r.key);
  }
  if (!dry_run) d->remove_stale_temps();
  return removed;
}

}  // namespace npucache::storage
