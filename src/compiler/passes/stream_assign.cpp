// assign_streams: chains stay on one stream; a value's second and later
// consumers start new branches on other streams.
#include "compiler/passes.h"

#include <algorithm>

namespace npucache::compiler {

void assign_streams(DeviceProgram& p, bool single_stream, int max_streams) {
  const int streams = single_stream ? 1 : std::max(1, max_streams);
  p.num_streams = streams;
  std::vector<bool> continued(p.steps.size(), false);
  int next = 1 % streams;
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    ProgramStep& s = p.steps[i];
    if (streams == 1 || op_info(s.op).side_effect || s.op == Op::group_rank) {
      s.stream = 0;  // every rank issues communication (and rng) in one order
      continue;
    }
    int chosen = -1;
    for (int d : s.deps) {
      if (!continued[static_cast<std::size_t>(d)]) {
        continued[static_cast<std::size_t>(d)] = true;
        chosen = p.steps[static_cast<std::size_t>(d)].stream;
        break;
      }
    }
    if (chosen < 0) {
      chosen = next;
      next = (next + 1) % streams;
    }
    s.stream = chosen;
  }
}

}  // namespace npucache::compiler
