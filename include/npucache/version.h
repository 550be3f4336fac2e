// Library version.
#pragma once

namespace npucache {
// Semantic version of the library ("0.1.0").
const char* version();
}  // namespace npucache
