#include "cache/remote_options.h"

#include <npucache/error.h>

#include "log/log.h"
#include "process/context.h"
#include "process/once.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>

namespace npucache::cache {

namespace {

// The remote of $NPUCACHE_REMOTE, which a launcher may set for a whole
// fleet: a malformed one is warned about once (masked) and the job runs
// with the local cache only.
std::optional<remote::Config> from_environment(const std::string& url) {
  try {
    return remote::parse_remote(url);
  } catch (const ConfigError& e) {
    if (process::Context::current().get<process::Once>().first("malformed NPUCACHE_REMOTE|" + remote::shown_url(url)))
      log::warn("NPUCACHE_REMOTE is not used: {}; the job runs with the local cache only", e.what());
    return std::nullopt;
  }
}

}  // namespace

remote::Config resolve_remote(const RemoteOptions& o) {
  std::string url = o.url;
  const bool from_env = url.empty();
  if (from_env)
    if (const char* env = std::getenv("NPUCACHE_REMOTE")) url = env;
  if (url.empty() || url == "off" || url == "none") return {};
  remote::Config c;
  if (from_env) {
    std::optional<remote::Config> parsed = from_environment(url);
    if (!parsed) return {};
    c = std::move(*parsed);
  } else {
    c = remote::parse_remote(url);
  }
  if (o.read_only) c.read_only = *o.read_only;
  if (o.connect_timeout_s) {
    if (!(*o.connect_timeout_s > 0) || !std::isfinite(*o.connect_timeout_s))
      throw ConfigError("RemoteOptions::connect_timeout_s must be a positive number of seconds");
    c.connect_timeout_s = *o.connect_timeout_s;
  }
  if (o.timeout_s) {
    if (!(*o.timeout_s > 0) || !std::isfinite(*o.timeout_s))
      throw ConfigError("RemoteOptions::timeout_s must be a positive number of seconds");
    c.timeout_s = *o.timeout_s;
  }
  if (o.max_object_bytes) c.max_object_bytes = *o.max_object_bytes;
  // The options hold for every shard of the tier.
  for (auto& shard : c.shards) {
    if (o.read_only) shard.read_only = c.read_only;
    if (o.connect_timeout_s) shard.connect_timeout_s = c.connect_timeout_s;
    if (o.timeout_s) shard.timeout_s = c.timeout_s;
    shard.max_object_bytes = c.max_object_bytes;
  }
  const char* pw = std::getenv("NPUCACHE_REMOTE_PASSWORD");
  const char* pw_file = std::getenv("NPUCACHE_REMOTE_PASSWORD_FILE");
  if (pw && *pw) {
    c.endpoint.password = pw;
    for (auto& shard : c.shards) shard.endpoint.password = pw;
  } else if (pw_file && *pw_file) {
    std::ifstream f(pw_file);
    if (!f)
      throw ConfigError(std::string("NPUCACHE_REMOTE_PASSWORD_FILE ") + pw_file + " cannot be read (" +
                        std::strerror(errno) + "); name a file holding the remote's password");
    std::string line;
    std::getline(f, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    c.endpoint.password = line;
    for (auto& shard : c.shards) shard.endpoint.password = line;
  } else if (c.password_in_url &&
             process::Context::current().get<process::Once>().first("password in the remote URL|" + c.url)) {
    log::warn(
        "the remote cache URL {} carries a password, which other users can read in process listings; "
        "set NPUCACHE_REMOTE_PASSWORD or NPUCACHE_REMOTE_PASSWORD_FILE instead",
        c.url);
  }
  return c;
}

}  // namespace npucache::cache
