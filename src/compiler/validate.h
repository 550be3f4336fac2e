// The structural check of a DeviceProgram read from outside the process (a
// cache file, a bundle, another rank): every index in range, every step a
// kernel whose result type is what its operands and attributes give (the
// IR's own type rules), views only of earlier buffers, dependencies only
// on earlier steps. A program that passes cannot make the executor or a
// kernel read or write out of bounds; one that does not is an Error naming
// the step and what is wrong.
#pragma once

#include "compiler/program.h"

#include <vector>

namespace npucache::compiler {

// `calls`: region call steps are allowed (a method's program before
// linking, link_program.h); their types are checked as any step's.
// `typed` (one per step, or null): a step marked 1 had its result type
// checked by the validation of the program it was copied from with the
// same op, attributes and buffer types (a linked program's parts,
// ProgramLinkStats::typed); everything else of it is checked again.
void validate_program(const DeviceProgram& p, bool calls = false, const std::vector<char>* typed = nullptr);

}  // namespace npucache::compiler
