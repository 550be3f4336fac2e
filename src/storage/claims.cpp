#include "storage/claims.h"

#include "format/cache_error.h"
#include "format/names.h"
#include "log/log.h"

namespace npucache::storage {

std::string Claim::file_name(const std::string& graph_key) {
  if (!names::valid_graph_key(graph_key))
    throw ConfigError("a compile claim needs a graph key (32 hex digits), got '" + graph_key + "'");
  return "claim-" + graph_key + ".lock";
}

std::optional<Claim> Claim::try_take(const std::string& dir, const std::string& graph_key) {
  std::string name = file_name(graph_key);
  Dir locks = Dir::open(dir, Safety::cache, Create::no).sub(names::kLocksDir, Create::yes);
  // A holder removes its file before it releases the lock, so a claimant
  // that opened the file before the removal and locks it after holds a
  // lock on a file no later claimant opens: the claim is the locked file
  // only while the name still refers to it. Otherwise the name is opened
  // again (the newcomer's file, or a new one).
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto lock = locks.lock_within(name, false, 0.0);
    if (!lock) return std::nullopt;
    const auto now = locks.stat(name);
    if (now && now->ino != 0 && now->ino == lock->inode())
      return Claim(std::move(locks), std::move(*lock), std::move(name));
  }
  return std::nullopt;
}

Claim::~Claim() {
  if (name_.empty()) return;
  try {
    locks_.remove(name_);
  } catch (const Error& e) {  // the file stays, claiming nothing once released
    log::debug("compile claim {} not removed: {}", name_, e.what());
  }
}

}  // namespace npucache::storage
