// The state behind a Tensor handle.
#pragma once

#include <npucache/ir/graph.h>
#include <npucache/runtime/memory.h>

#include "runtime/pool.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  // An output of a replay living in a pool of captured graphs (and views
  // of it): a later replay may overwrite it (runtime/pool.h).
  std::shared_ptr<const runtime::ReplayTicket> ticket;

  bool traced() const { return trace_id != 0; }
};

// Throws ShapeError when `dims` has a negative dim or more than 2^40
// elements (more than any device holds: sizes out of range), before
// anything is allocated or recorded.
void check_dims(const std::vector<int64_t>& dims);

// Throws DeviceError naming `what` when `impl` is a replay output that a
// later replay overwrote; does nothing for any other tensor.
void check_live(const TensorImpl& impl, const std::string& what);

}  // namespace npucache::detail
