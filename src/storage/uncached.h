// The one warning of a cache directory that cannot be used as asked.
#pragma once

#include "storage/uses.h"

#include <string>

namespace npucache::storage {

// Logs `what` once per cache directory and kind of problem ("refused",
// "save", "tuning", "profiles"): a refused or read-only cache warns once,
// not on every method; later ones are debug lines.
void warn_uncached(const std::string& dir, const std::string& kind, const std::string& what);

}  // namespace npucache::storage
