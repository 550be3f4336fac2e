// The names the storage layer uses unqualified: its namespace sees the
// format layer's (src/LAYERS: storage uses format). Every header of the
// layer includes this one.
#pragma once

namespace npucache::format {}
namespace npucache::storage {
using namespace npucache::format;
}  // namespace npucache::storage
