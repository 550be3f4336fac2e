#include "compiler/validate.h"

#include <npucache/error.h>

#include <string>
#include <vector>

namespace npucache::compiler {
namespace {

[[noreturn]] void bad(const std::string& what) { throw Error("invalid program: " + what); }

}  // namespace

void validate_program(const DeviceProgram& p, bool calls, const std::vector<char>* typed) {
  const auto nb = static_cast<int64_t>(p.buffers.size());
  if (typed && typed->size() != p.steps.size())
    bad(std::to_string(typed->size()) + " typed marks for " + std::to_string(p.steps.size()) + " steps");
  if (p.num_streams < 1 || p.num_streams > 64) bad("stream count " + std::to_string(p.num_streams));
  if (p.num_inputs < 0 || p.num_output_buffers < 0) bad("negative input or output count");
  // Every input and every output buffer has exactly one buffer (lowering
  // numbers them as it creates them), so neither count can exceed the
  // buffers: a runner sizes its argument tables by these counts.
  if (p.num_inputs > nb || p.num_output_buffers > nb)
    bad(std::to_string(p.num_inputs) + " inputs and " + std::to_string(p.num_output_buffers) + " outputs for " +
        std::to_string(nb) + " buffers");
  std::vector<char> input_seen(static_cast<std::size_t>(p.num_inputs), 0);
  std::vector<char> output_seen(static_cast<std::size_t>(p.num_output_buffers), 0);
  for (int64_t i = 0; i < nb; ++i) {
    const BufferDesc& b = p.buffers[static_cast<std::size_t>(i)];
    const auto which = [i] { return "buffer " + std::to_string(i); };
    switch (b.kind) {
      case BufferKind::input:
        if (b.index < 0 || b.index >= p.num_inputs) bad(which() + " names input " + std::to_string(b.index));
        if (input_seen[static_cast<std::size_t>(b.index)]++)
          bad(which() + " names input " + std::to_string(b.index) + " again");
        break;
      case BufferKind::parameter:
        if (b.index < 0 || b.index >= static_cast<int>(p.parameters.size()))
          bad(which() + " names parameter " + std::to_string(b.index));
        break;
      case BufferKind::output:
        if (b.index < 0 || b.index >= p.num_output_buffers) bad(which() + " names output " + std::to_string(b.index));
        if (output_seen[static_cast<std::size_t>(b.index)]++)
          bad(which() + " names output " + std::to_string(b.index) + " again");
        break;
      case BufferKind::view:
        if (b.index < 0 || b.index >= i) bad(which() + " is a view of buffer " + std::to_string(b.index));
        break;
      case BufferKind::arena:
      case BufferKind::temp: break;
    }
    for (const auto& d : b.type.shape)
      if (auto c = d.try_constant(); c && (*c < 0 || *c > (int64_t{1} << 40)))
        bad(which() + " has dim " + std::to_string(*c));
  }
  for (std::size_t si = 0; si < p.steps.size(); ++si) {
    const ProgramStep& s = p.steps[si];
    const auto which = [&] { return "step " + std::to_string(si) + " (" + std::string(op_name(s.op)) + ")"; };
    const OpInfo& info = op_info(s.op);
    if (s.op == Op::placeholder || info.composite || (s.op == Op::region_call && !calls))
      bad(which() + " is no kernel");
    if (s.stream < 0 || s.stream >= p.num_streams) bad(which() + " runs on stream " + std::to_string(s.stream));
    for (int d : s.deps)
      if (d < 0 || static_cast<std::size_t>(d) >= si) bad(which() + " depends on step " + std::to_string(d));
    if (static_cast<int>(s.operands.size()) < info.min_inputs || static_cast<int>(s.operands.size()) > info.max_inputs)
      bad(which() + " has " + std::to_string(s.operands.size()) + " operands");
    for (int o : s.operands)
      if (o < 0 || o >= nb) bad(which() + " reads buffer " + std::to_string(o));
    if (s.result < 0 || s.result >= nb) bad(which() + " writes buffer " + std::to_string(s.result));
    if (typed && (*typed)[si]) continue;
    std::vector<const TensorType*> types;
    types.reserve(s.operands.size());
    for (int o : s.operands) types.push_back(&p.buffers[static_cast<std::size_t>(o)].type);
    const TensorType& result = p.buffers[static_cast<std::size_t>(s.result)].type;
    DimUnifier strict;
    TensorType want;
    try {
      want = infer_type(s.op, types, s.attrs, strict);
    } catch (const Error& e) {
      bad(which() + ": " + e.what());
    }
    if (!(want == result)) bad(which() + " writes " + type_str(result) + " where its operands give " + type_str(want));
  }
  for (std::size_t i = 0; i < input_seen.size(); ++i)
    if (!input_seen[i]) bad("input " + std::to_string(i) + " has no buffer");
  for (std::size_t i = 0; i < output_seen.size(); ++i)
    if (!output_seen[i]) bad("output " + std::to_string(i) + " has no buffer");
  for (int o : p.outputs)
    if (o < 0 || o >= nb) bad("output buffer " + std::to_string(o));
}

}  // namespace npucache::compiler
