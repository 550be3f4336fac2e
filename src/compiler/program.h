// The compiled form of a graph: a DeviceProgram.
//
// Buffers describe every value: where its storage comes from (a call input,
// a module parameter, the arena, a per-run output allocation, or a view of
// another buffer) and its dtype and symbolic dims. Steps launch kernels (or
// record/wait events) on the program's streams; dims and SymExpr attributes
// are evaluated against the call's symbol bindings when a run is prepared.
// `deps` lists the earlier steps a step must follow (data, in-place and
// side-effect order); the executor turns cross-stream deps into events.
//
// Same graph + same autotune decisions => byte-identical serialization
// (serialize.h): every container here is ordered.
#pragma once

#include <npucache/ir/attrs.h>
#include <npucache/ir/graph.h>

#include <string>
#include <vector>

namespace npucache::compiler {

enum class BufferKind : uint8_t { input, parameter, arena, output, temp, view };

struct BufferDesc {
  BufferKind kind = BufferKind::arena;
  int index = -1;  // input/parameter/output index; view: the viewed buffer
  TensorType type;
};

struct ProgramStep {
  Op op = Op::placeholder;
  Attrs attrs;
  std::vector<int> operands;  // buffer ids
  int result = -1;            // buffer id
  int stream = 0;
  std::vector<int> deps;  // earlier step indices
};

struct ParameterRef {
  std::string name;
  PlaceholderKind kind = PlaceholderKind::parameter;
};

struct DeviceProgram {
  std::vector<BufferDesc> buffers;
  std::vector<ProgramStep> steps;
  std::vector<ParameterRef> parameters;
  std::vector<int> outputs;  // buffer ids (possibly views)
  int num_inputs = 0;
  int num_output_buffers = 0;
  int num_streams = 1;

  // The buffer whose storage `b` uses (follows views).
  int root(int b) const;
  // Appends `b` to the outputs; its root gets per-run storage (the next
  // output buffer) unless it is an input or a parameter, which the caller
  // already owns, or already an output.
  void add_output(int b);
};

// `a` with every SymExpr attribute evaluated under `b` (kernels read
// constants).
Attrs evaluate_attrs(const Attrs& a, const SymBindings& b);

}  // namespace npucache::compiler
