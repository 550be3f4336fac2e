#include "format/records.h"

#include <xxhash.h>

#include <cstdio>

namespace npucache::format {

std::string_view miss_reason_name(MissReason r) {
  switch (r) {
    case MissReason::absent: return "absent";
    case MissReason::stale: return "stale";
    case MissReason::computation: return "computation";
    case MissReason::corrupt: return "corrupt";
    case MissReason::signature: return "signature";
    case MissReason::refused: return "refused";
  }
  return "unknown";
}

std::string checksum(std::string_view bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

}  // namespace npucache::format
