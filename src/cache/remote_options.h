// The remote tier's configuration from the public options
// (CacheOptions::remote, include/npucache/cache.h) and the environment.
#pragma once

#include <npucache/cache.h>

#include "cache/uses.h"
#include "remote/config.h"

namespace npucache::cache {

// The remote a cached method uses: options.url, else $NPUCACHE_REMOTE
// ("" or "off": none); the password from $NPUCACHE_REMOTE_PASSWORD, else the
// file named by $NPUCACHE_REMOTE_PASSWORD_FILE, else the URL's (warned about
// once); the options' fields override the URL's attributes. ConfigError for
// a malformed options.url, a bad option or an unreadable password file; a
// malformed $NPUCACHE_REMOTE (a launcher may set it for a whole fleet) is
// warned about once, masked, and gives no remote: the job runs with the
// local cache only.
remote::Config resolve_remote(const RemoteOptions& options);

}  // namespace npucache::cache
