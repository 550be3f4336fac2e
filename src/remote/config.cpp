#include "remote/config.h"

#include <npucache/error.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace npucache::remote {
namespace {

// The text between the scheme and the last '@': what may be a password.
std::string_view credentials(std::string_view url) {
  const std::size_t s = url.find("://");
  const std::size_t from = s == std::string_view::npos ? 0 : s + 3;
  const std::size_t at = url.rfind('@');
  return at == std::string_view::npos || at < from ? std::string_view() : url.substr(from, at - from);
}

// `why` without the URL's credentials, should a part of them be quoted.
std::string scrubbed(std::string why, std::string_view url) {
  const std::string_view cred = credentials(url);
  const std::size_t colon = cred.find(':');
  const std::string_view secret = colon == std::string_view::npos ? cred : cred.substr(colon + 1);
  for (std::string_view part : {cred, secret}) {
    if (part.size() < 4) continue;  // a short one would garble the message; the split itself never quotes it
    for (std::size_t i = why.find(part); i != std::string::npos; i = why.find(part, i + 3))
      why.replace(i, part.size(), "***");
  }
  return why;
}

[[noreturn]] void bad(std::string_view url, const std::string& why);

// A path to quote in a message, or nothing when the URL holds an '@' (these
// URLs have no user part: what precedes it may be a password).
std::string quoted_path(std::string_view path, std::string_view url) {
  return url.find('@') == std::string_view::npos ? "'" + std::string(path) + "' " : std::string();
}

[[noreturn]] void bad(std::string_view url, const std::string& why) {
  throw ConfigError("remote cache URL '" + shown_url(url) + "': " + scrubbed(why, url) +
                    "; write redis://host:port[/db], redis+unix:///path/to/socket or file:///path/to/directory, "
                    "with attributes such as ?read-only&timeout=2s&connect-timeout=100ms&max-object=64M");
}

bool whole(std::string_view s, long long lo, long long hi, long long* out) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string decode_percent(std::string_view s, std::string_view url) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    long long v = 0;
    if (i + 2 >= s.size()) bad(url, "a '%' escape is cut short");
    const std::string_view hex = s.substr(i + 1, 2);
    if (hex.size() != 2 || std::from_chars(hex.data(), hex.data() + 2, v, 16).ptr != hex.data() + 2)
      bad(url, "a '%' is not followed by two hex digits");  // not shown: it may be a password's
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

std::size_t parse_bytes(std::string_view text, std::string_view url) {
  char* end = nullptr;
  const std::string t(text);
  const double v = std::strtod(t.c_str(), &end);
  std::string unit(end);
  double scale = 1;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else
    bad(url, "max-object '" + t + "' is not a size (64M, 1G, 1048576)");
  if (t.empty() || end == t.c_str() || !std::isfinite(v) || v < 0 || v * scale > 1e15)
    bad(url, "max-object '" + t + "' is not a size (64M, 1G, 1048576)");
  return static_cast<std::size_t>(v * scale);
}

void attribute(Config& c, std::string_view name, std::string_view value, bool has_value, std::string_view url) {
  if (name == "read-only" || name == "read_only") {
    if (!has_value || value == "true" || value == "1" || value == "yes")
      c.read_only = true;
    else if (value == "false" || value == "0" || value == "no")
      c.read_only = false;
    else
      bad(url, "read-only takes true or false, not '" + std::string(value) + "'");
  } else if (name == "connect-timeout" || name == "connect_timeout") {
    c.connect_timeout_s = parse_seconds(value, "remote cache URL '" + shown_url(url) + "': connect-timeout");
  } else if (name == "timeout") {
    c.timeout_s = parse_seconds(value, "remote cache URL '" + shown_url(url) + "': timeout");
  } else if (name == "list-timeout" || name == "list_timeout") {
    c.list_timeout_s = parse_seconds(value, "remote cache URL '" + shown_url(url) + "': list-timeout");
  } else if (name == "max-object" || name == "max_object") {
    c.max_object_bytes = parse_bytes(value, url);
  } else if (name == "db") {
    if (c.scheme != Scheme::redis) bad(url, "db is an attribute of redis:// remotes only");
    long long db = 0;
    if (!whole(value, 0, 1 << 20, &db)) bad(url, "db '" + std::string(value) + "' is not a database number");
    c.endpoint.db = static_cast<int>(db);
  } else {
    bad(url, "unknown attribute '" + std::string(name) +
                 "' (the attributes are read-only, connect-timeout, timeout, list-timeout, max-object, db)");
  }
}

}  // namespace

std::string shown_url(std::string_view url) {
  const std::size_t s = url.find("://");
  const std::size_t from = s == std::string_view::npos ? 0 : s + 3;
  // A path (file://, unix sockets) holds no user part; an '@' in it is the
  // path's.
  if (s != std::string_view::npos && from < url.size() && url[from] == '/' && !url.starts_with("redis://"))
    return std::string(url);
  // The last '@' anywhere: a password may hold an unescaped '/', '?', '#' or
  // '@' (a query holding an '@' is hidden too, which costs a message nothing).
  const std::size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < from) return std::string(url);
  const std::string_view cred = url.substr(from, at - from);
  const std::size_t colon = cred.find(':');
  const std::string user(colon == std::string_view::npos ? std::string_view() : cred.substr(0, colon));
  // A user name is shown unless it reaches past what a host part may hold
  // (then the split is a guess and it may be a password's).
  const bool plain = user.find_first_of("/?#") == std::string::npos;
  return std::string(url.substr(0, from)) + (plain ? user : "***") + ":***" + std::string(url.substr(at));
}

std::string shown_remote(std::string_view text) {
  std::string out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = text.find(',', from);
    out += shown_url(text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) return out;
    out += ',';
    from = comma + 1;
  }
}

double parse_seconds(std::string_view text, const std::string& what) {
  const std::string t(text);
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  const std::string unit(end);
  if (unit == "ms")
    v /= 1000;
  else if (!unit.empty() && unit != "s")
    v = -1;
  if (t.empty() || end == t.c_str() || !std::isfinite(v) || v <= 0 || v > 86400)
    throw ConfigError(what + " '" + t +
                      "' is not a positive duration: give seconds (2, 0.5, 2s) or milliseconds (100ms)");
  return v;
}

Config parse_url(std::string_view url) {
  Config c;
  std::string_view rest = url;
  // redis://: the user part ends at the last '@' of the URL, before the host,
  // path and query are split, so a '/', '?', '#' or '@' in a password is
  // the password's.
  std::string_view cred;
  bool has_cred = false;
  if (rest.rfind("redis://", 0) == 0) {
    const std::size_t at = rest.rfind('@');
    if (at != std::string_view::npos) {
      cred = rest.substr(8, at - 8);
      has_cred = true;
    }
  }
  const std::size_t after_cred = has_cred ? 8 + cred.size() + 1 : 0;
  const std::size_t q = rest.find('?', after_cred);
  std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  if (rest.rfind("file://", 0) == 0) {
    c.scheme = Scheme::file;
    std::string_view path = rest.substr(7);
    if (path.empty() || path[0] != '/')
      bad(url, "the directory " + quoted_path(path, url) + "must be absolute (file:///shared/npucache-remote)");
    c.endpoint.path = decode_percent(path, url);
  } else if (rest.rfind("redis+unix://", 0) == 0 || rest.rfind("unix://", 0) == 0) {
    c.endpoint.unix_socket = true;
    std::string_view path = rest.substr(rest.find("://") + 3);
    if (path.empty() || path[0] != '/')
      bad(url, "the socket path " + quoted_path(path, url) + "must be absolute (redis+unix:///run/redis.sock)");
    c.endpoint.path = decode_percent(path, url);
  } else if (rest.rfind("redis://", 0) == 0) {
    std::string_view auth_host = rest.substr(after_cred ? after_cred : 8);
    const std::size_t slash = auth_host.find('/');
    std::string_view db = slash == std::string_view::npos ? std::string_view() : auth_host.substr(slash + 1);
    auth_host = auth_host.substr(0, slash);
    if (has_cred) {
      const std::size_t colon = cred.find(':');
      if (colon == std::string_view::npos) {
        c.endpoint.password = decode_percent(cred, url);  // redis://password@host, as some clients allow
      } else {
        c.endpoint.user = decode_percent(cred.substr(0, colon), url);
        c.endpoint.password = decode_percent(cred.substr(colon + 1), url);
      }
      c.password_in_url = !c.endpoint.password.empty();
    }
    std::string_view host = auth_host;
    if (!host.empty() && host[0] == '[') {  // [::1]:6379
      const std::size_t close = host.find(']');
      if (close == std::string_view::npos) bad(url, "an IPv6 address must be closed by ']'");
      c.endpoint.host = std::string(host.substr(1, close - 1));
      host = host.substr(close + 1);
      if (!host.empty() && host[0] != ':') bad(url, "expected ':port' after the IPv6 address");
      host = host.empty() ? host : host.substr(1);
      if (!host.empty()) {
        long long p = 0;
        if (!whole(host, 1, 65535, &p)) bad(url, "port '" + std::string(host) + "' is not a port number (1-65535)");
        c.endpoint.port = static_cast<int>(p);
      }
    } else {
      const std::size_t colon = host.rfind(':');
      c.endpoint.host = std::string(host.substr(0, colon));
      if (colon != std::string_view::npos) {
        long long p = 0;
        const std::string_view port = host.substr(colon + 1);
        if (!whole(port, 1, 65535, &p)) bad(url, "port '" + std::string(port) + "' is not a port number (1-65535)");
        c.endpoint.port = static_cast<int>(p);
      }
    }
    if (c.endpoint.host.empty()) bad(url, "no host");
    if (!db.empty()) {
      long long n = 0;
      if (!whole(db, 0, 1 << 20, &n)) bad(url, "'/" + std::string(db) + "' is not a database number");
      c.endpoint.db = static_cast<int>(n);
    }
  } else {
    const std::size_t colon = rest.find("://");
    bad(url, colon == std::string_view::npos
                 ? std::string("no scheme")
                 : "unknown scheme '" + std::string(rest.substr(0, colon)) + "' (redis, redis+unix, unix or file)");
  }
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    attribute(c, item.substr(0, eq), eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1),
              eq != std::string_view::npos, url);
  }
  c.url = shown_url(url);
  return c;
}

Config parse_remote(std::string_view text) {
  std::vector<std::string_view> urls;
  for (std::size_t from = 0;;) {
    const std::size_t comma = text.find(',', from);
    std::string_view u = text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    while (!u.empty() && u.front() == ' ') u.remove_prefix(1);
    while (!u.empty() && u.back() == ' ') u.remove_suffix(1);
    urls.push_back(u);
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  if (urls.size() == 1) return parse_url(urls.front());
  // Every piece is checked to be a URL before any is parsed or shown: a
  // piece without a scheme is most likely the rest of a password.
  for (std::size_t i = 0; i < urls.size(); ++i)
    if (urls[i].find("://") == std::string_view::npos)
      throw ConfigError("remote cache setting: the text after comma " + std::to_string(i) +
                        (urls[i].empty() ? " is empty" : " is not a URL (no scheme)") +
                        "; separate the shards' URLs by commas, each with its scheme "
                        "(redis://a:6379,redis://b:6379), and write a comma inside one URL (a password's) as %2C");
  Config tier;
  for (std::string_view u : urls) tier.shards.push_back(parse_url(u));
  const Config& first = tier.shards.front();
  for (std::size_t i = 1; i < tier.shards.size(); ++i) {
    const Config& s = tier.shards[i];
    const std::string pair = "shards " + first.url + " and " + s.url;
    if (s.scheme != first.scheme)
      throw ConfigError("remote cache setting: " + pair +
                        " mix a Redis server and a shared directory; the shards of one tier are all Redis servers or "
                        "all shared directories");
    if (s.read_only != first.read_only)
      throw ConfigError("remote cache setting: " + pair +
                        " disagree on read-only, which holds for the whole tier; give ?read-only on every URL or on "
                        "none (or --remote-read-only)");
    if (s.max_object_bytes != first.max_object_bytes)
      throw ConfigError("remote cache setting: " + pair +
                        " disagree on max-object, which holds for the whole tier; give the same max-object on every "
                        "URL or on none");
    for (std::size_t j = 0; j < i; ++j) {
      const Endpoint &a = tier.shards[j].endpoint, &b = s.endpoint;
      if (a.unix_socket == b.unix_socket && a.host == b.host && a.port == b.port && a.path == b.path && a.db == b.db)
        throw ConfigError("remote cache setting: " + tier.shards[j].url + " and " + s.url +
                          " name one server twice; name each shard once");
    }
  }
  tier.scheme = first.scheme;
  tier.endpoint = first.endpoint;
  tier.read_only = first.read_only;
  tier.connect_timeout_s = first.connect_timeout_s;
  tier.timeout_s = first.timeout_s;
  tier.max_object_bytes = first.max_object_bytes;
  for (const Config& s : tier.shards) {
    tier.url += (tier.url.empty() ? "" : ",") + s.url;
    tier.password_in_url = tier.password_in_url || s.password_in_url;
  }
  return tier;
}

}  // namespace npucache::remote
