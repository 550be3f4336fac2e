#include "storage/uncached.h"

#include "log/log.h"
#include "process/context.h"
#include "process/once.h"

namespace npucache::storage {

void warn_uncached(const std::string& dir, const std::string& kind, const std::string& what) {
  if (!process::Context::current().get<process::Once>().first("uncached|" + dir + "|" + kind)) {
    log::debug("{}", what);
    return;
  }
  log::warn("{}", what);
}

}  // namespace npucache::storage
