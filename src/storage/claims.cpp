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
  // A holder removes its file before it releases the lock: the claim is
  // the locked file only while the name still refers to it (lock_within
  // opens the name again otherwise).
  auto lock = locks.lock_within(name, false, 0.0);
  if (!lock) return std::nullopt;
  return Claim(std::move(locks), std::move(*lock), std::move(name));
}

Claim::~Claim() {
  if (name_.empty()) return;
  try {
    // Only its own file: a name removed meanwhile (by clear) may now be
    // another claimant's, which holds it.
    locks_.remove_lock(name_, lock_);
  } catch (const Error& e) {  // the file stays, claiming nothing once released
    log::debug("compile claim {} not removed: {}", name_, e.what());
  }
}

}  // namespace npucache::storage
