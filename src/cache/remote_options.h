// The remote tier's configuration from the public options
// (CacheOptions::remote, include/npucache/cache.h) and the environment.
#pragma once

#include <npucache/cache.h>

#include "cache/uses.h"
#include "remote/config.h"

namespace npucache::cache {

// The remote a cached method uses: options.url, else $NPUCACHE_REMOTE, else
// the remote of the user's npucache.conf (process/settings.h)
// ("" or "off": none); the password from $NPUCACHE_REMOTE_PASSWORD, else the
// file named by $NPUCACHE_REMOTE_PASSWORD_FILE, else the URL's (warned about
// once); the options' fields override the URL's attributes; the signing key
// and trusted keys files from the options, else $NPUCACHE_REMOTE_SIGNING_KEY
// and $NPUCACHE_REMOTE_TRUSTED_KEYS, each loaded once to check it (made
// absolute). ConfigError for a malformed options.url, a bad option or a
// key file of the options that cannot be used. What comes from the
// environment (a launcher may set it for a whole fleet) never stops a job:
// a malformed $NPUCACHE_REMOTE or an unreadable
// $NPUCACHE_REMOTE_PASSWORD_FILE is warned about once, masked, and gives no
// remote (the job runs with the local cache only); a key file that cannot be used is warned about once, and then a
// signing key makes the remote read-only, trusted keys no remote at all
// (fail closed: no unsigned value is used).
remote::Config resolve_remote(const RemoteOptions& options);

}  // namespace npucache::cache
