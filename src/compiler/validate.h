// The structural check of a DeviceProgram read from outside the process (a
// cache file, a bundle, another rank): every index in range, every step a
// kernel whose result type is what its operands and attributes give (the
// IR's own type rules), views only of earlier buffers, dependencies only
// on earlier steps. A program that passes cannot make the executor or a
// kernel read or write out of bounds; one that does not is an Error naming
// the step and what is wrong.
#pragma once

#include "compiler/program.h"

namespace npucache::compiler {

// `calls`: region call steps are allowed (a method's program before
// linking, link_program.h); their types are checked as any step's.
void validate_program(const DeviceProgram& p, bool calls = false);

}  // namespace npucache::compiler
