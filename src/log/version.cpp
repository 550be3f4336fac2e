#include <npucache/version.h>

namespace npucache {
const char* version() { return NPUCACHE_VERSION; }
}  // namespace npucache
