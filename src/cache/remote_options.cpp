#include "cache/remote_options.h"

#include <npucache/error.h>

#include "log/log.h"
#include "process/context.h"
#include "process/once.h"
#include "process/settings.h"
#include "remote/signing.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>

namespace npucache::cache {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string absolute(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

bool first_time(const std::string& what) { return process::Context::current().get<process::Once>().first(what); }

// The signing key and trusted keys files into `c`, each checked by loading
// it. False when the remote must not be used (trusted keys from the
// environment that cannot be used: fail closed).
bool resolve_signing(const RemoteOptions& o, remote::Config& c) {
  if (!o.signing_key_file.empty()) {
    (void)remote::signing::SigningKey::load(o.signing_key_file);  // ConfigError: the caller's
    c.signing_key_file = absolute(o.signing_key_file);
  } else if (const std::string env = env_or_empty("NPUCACHE_REMOTE_SIGNING_KEY"); !env.empty()) {
    try {
      (void)remote::signing::SigningKey::load(env);
      c.signing_key_file = absolute(env);
    } catch (const ConfigError& e) {
      if (first_time("signing key unusable|" + env))
        log::warn("NPUCACHE_REMOTE_SIGNING_KEY: {}; nothing is written to the remote cache {} (read-only)", e.what(),
                  c.url);
      c.read_only = true;
    }
  }
  if (!o.trusted_keys_file.empty()) {
    (void)remote::signing::load_trusted(o.trusted_keys_file);
    c.trusted_keys_file = absolute(o.trusted_keys_file);
  } else if (const std::string env = env_or_empty("NPUCACHE_REMOTE_TRUSTED_KEYS"); !env.empty()) {
    try {
      (void)remote::signing::load_trusted(env);
      c.trusted_keys_file = absolute(env);
    } catch (const ConfigError& e) {
      if (first_time("trusted keys unusable|" + env))
        log::warn("NPUCACHE_REMOTE_TRUSTED_KEYS: {}; the remote cache {} is not used (no unsigned value may be)",
                  e.what(), c.url);
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// The remote of $NPUCACHE_REMOTE (or of the user's npucache.conf, named by
// `source`), which a launcher may set for a whole fleet: a malformed one is
// warned about once (masked) and the job runs with the local cache only.
std::optional<remote::Config> from_environment(const std::string& url, const std::string& source) {
  try {
    return remote::parse_remote(url);
  } catch (const ConfigError& e) {
    if (process::Context::current().get<process::Once>().first("malformed NPUCACHE_REMOTE|" + remote::shown_url(url)))
      log::warn("{} is not used: {}; the job runs with the local cache only",
                source == "environment NPUCACHE_REMOTE" ? std::string("NPUCACHE_REMOTE") : "the remote of " + source,
                e.what());
    return std::nullopt;
  }
}

}  // namespace

remote::Config resolve_remote(const RemoteOptions& o) {
  std::string url = o.url;
  const bool from_env = url.empty();
  std::string source;
  if (from_env) {  // NPUCACHE_REMOTE, else the user's npucache.conf
    const process::Setting r = process::setting("remote");
    url = r.value;
    source = r.source;
  }
  if (url.empty() || url == "off" || url == "none") return {};
  remote::Config c;
  if (from_env) {
    std::optional<remote::Config> parsed = from_environment(url, source);
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
    if (!f) {  // the environment never stops a job: without its password the remote is not used
      const std::string why = std::strerror(errno);
      if (first_time(std::string("password file unreadable|") + pw_file))
        log::warn(
            "NPUCACHE_REMOTE_PASSWORD_FILE {} cannot be read ({}); the remote cache {} is not used, the job runs "
            "with the local cache only: name a file holding the remote's password",
            pw_file, why, c.url);
      return {};
    }
    std::string line;
    std::getline(f, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    c.endpoint.password = line;
    for (auto& shard : c.shards) shard.endpoint.password = line;
  } else if (c.password_in_url && first_time("password in the remote URL|" + c.url)) {
    log::warn(
        "the remote cache URL {} carries a password, which other users can read in process listings; "
        "set NPUCACHE_REMOTE_PASSWORD or NPUCACHE_REMOTE_PASSWORD_FILE instead",
        c.url);
  }
  if (!resolve_signing(o, c)) return {};
  return c;
}

}  // namespace npucache::cache
