// The job report registry: every MethodReport of this process's
// coordinated methods, in call order (dist::reports()).
#pragma once

#include <npucache/cache.h>

namespace npucache::coord {

void add_report(const MethodReport& r);

}  // namespace npucache::coord
