#include <npucache/version.h>

namespace npucache {
const char* version() { return "0.1.0"; }
}  // namespace npucache
