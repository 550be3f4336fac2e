// Where the remote tier lives and how it is used: the parsed form of
// NPUCACHE_REMOTE / CacheOptions::remote / --remote (docs/GUIDE.md).
//
//   redis://[[user]:password@]host[:port][/db][?attr=value&...]
//   redis+unix:///path/to/socket[?db=N&attr=value&...]   (also unix://)
//   file:///path/to/shared/directory[?attr=value&...]
//   URL,URL,...   several servers forming one tier (shards, sharded_backend.h)
//
// The scheme chooses the backend (remote/backend.h: make_backend).
// Attributes: read-only (or read-only=true|false), connect-timeout,
// timeout and list-timeout (seconds, or with a unit: 100ms, 2s; Redis
// only), max-object
// (bytes, or 64M, 1G), db (Redis only). A password in the URL works but is reported
// (`password_in_url`): it shows in process listings; the tier takes it
// from NPUCACHE_REMOTE_PASSWORD(_FILE) instead when those are set.
//
// The user part of a redis:// URL ends at its last '@', so a password may
// hold '/', '?', '#' or '@' unescaped (percent escapes work too).
//
// Pure functions: parse_url throws ConfigError naming the part that is
// wrong and how to write it, showing the URL masked (shown_url) and never
// a password or a part of one; nothing here touches the network.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::remote {

// Which backend holds the remote.
enum class Scheme {
  redis,  // a Redis server, over TCP or a unix socket (redis_backend.cpp)
  file,   // a directory shared by the hosts, e.g. over NFS (file_backend.cpp)
};

struct Endpoint {
  bool unix_socket = false;
  std::string host;  // tcp: a name or an address
  int port = 6379;
  std::string path;  // unix: the socket's path; file: the directory
  int db = 0;        // SELECTed after connecting when not 0
  std::string user;  // AUTH user (Redis 6 ACLs), empty: the default user
  std::string password;
};

// 100 ms: a remote on the same network answers a connect in well under a
// millisecond; one that does not within 100 ms is down or far away, and
// every job start would wait for it.
inline constexpr double kDefaultConnectTimeoutS = 0.1;
// 5 s: enough for the largest object (64 MiB) over a slow link (~20 MB/s),
// short enough that a stopped server costs a job little.
inline constexpr double kDefaultTimeoutS = 5.0;
// 60 s: a listing (SCAN) walks the whole keyspace, not only the prefix; a
// shared Redis of millions of keys takes seconds whatever one round trip's
// timeout. A listing never runs longer than this (nor 4 timeouts).
inline constexpr double kDefaultListTimeoutS = 60.0;
// Objects above this are not sent: a remote is for sharing compile results,
// not for holding a model's weights by accident.
inline constexpr std::size_t kDefaultMaxObjectBytes = std::size_t{64} << 20;
// What a value may hold beyond max-object: its envelope (the object's
// record and graph text, an entry's fields). Readers refuse a larger value
// before reading it; writers never write one (Config::max_value_bytes).
inline constexpr std::size_t kValueSlackBytes = std::size_t{1} << 20;

struct Config {
  std::string url;  // as given, any password replaced by "***" (for messages)
  Scheme scheme = Scheme::redis;
  Endpoint endpoint;
  bool read_only = false;
  double connect_timeout_s = kDefaultConnectTimeoutS;
  double timeout_s = kDefaultTimeoutS;
  double list_timeout_s = kDefaultListTimeoutS;  // a whole listing: the longer of this and 4 timeouts
  std::size_t max_object_bytes = kDefaultMaxObjectBytes;
  // The largest value readers take and writers write.
  std::size_t max_value_bytes() const { return max_object_bytes + kValueSlackBytes; }
  bool password_in_url = false;
  // Several URLs (parse_remote): one Config per shard, in the setting's
  // order; the fields above are then the tier's (url: the shown URLs joined
  // by commas; scheme, endpoint and timeouts: the first shard's). Empty for
  // one URL.
  std::vector<Config> shards;
  // Signed publishing (signing.h, signed_backend.h): the signing.key file
  // whose key signs every value written, and the file of public keys whose
  // signatures make a read value usable (empty: none).
  std::string signing_key_file;
  std::string trusted_keys_file;
  bool enabled() const { return !url.empty(); }
};

// Throws ConfigError for anything that is not a URL of the forms above.
Config parse_url(std::string_view url);

// A setting: one URL (parse_url), or several separated by commas, each a
// shard of one tier (a comma inside one URL, as in a password, is written
// %2C). Shards are all Redis (redis://, redis+unix://) or all shared
// directories, each named once, and agree on read-only and max-object
// (the tier's decisions); timeouts may differ per URL. ConfigError
// otherwise, showing no password.
Config parse_remote(std::string_view text);

// `url` with the password of its user part (scheme://user:password@...)
// replaced by "***" (the user too when it holds '/', '?' or '#'): what
// every message shows.
std::string shown_url(std::string_view url);
// A remote setting (URL,URL,...) as messages show it: each URL shown_url's.
std::string shown_remote(std::string_view text);

// "100ms", "2s", "0.5": seconds; ConfigError naming `what` otherwise.
double parse_seconds(std::string_view text, const std::string& what);

}  // namespace npucache::remote
