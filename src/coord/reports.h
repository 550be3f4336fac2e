// The job report registry (a service of the process context): every MethodReport of this process's
// coordinated methods, in call order (dist::reports()).
#pragma once

#include <npucache/cache.h>
#include <npucache/coordinator.h>

#include <cstdint>

namespace npucache::coord {

// Keeps `r` and returns its ticket (unique in the process).
std::uint64_t add_report(const MethodReport& r);
// Replaces the record of `ticket` with `r` (its first call's end timed);
// nothing when the records were cleared since.
void amend_report(std::uint64_t ticket, const MethodReport& r);
void add_step_report(const dist::StepReport& r);

}  // namespace npucache::coord
