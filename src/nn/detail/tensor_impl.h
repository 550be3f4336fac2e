// The state behind a Tensor handle.
#pragma once

#include <npucache/ir/graph.h>
#include <npucache/runtime/memory.h>

#include <cstdint>

namespace npucache::detail {

struct TraceState;

struct TensorImpl {
  TensorType type;  // eager: constant dims
  // Eager mode (no block when `meta`).
  runtime::BlockPtr block;
  std::size_t offset = 0;
  int device = -1;
  // Tracing mode: the value in the trace with id `trace_id` (never 0).
  uint64_t trace_id = 0;
  ValueId value = -1;
  // Meta mode: a type and a device, no storage (Tensor::meta).
  bool meta = false;

  bool traced() const { return trace_id != 0; }
};

}  // namespace npucache::detail
