// The job report registry (a service of the process context): every MethodReport of this process's
// coordinated methods, in call order (dist::reports()).
#pragma once

#include <npucache/cache.h>
#include <npucache/coordinator.h>

namespace npucache::coord {

void add_report(const MethodReport& r);
void add_step_report(const dist::StepReport& r);

}  // namespace npucache::coord
