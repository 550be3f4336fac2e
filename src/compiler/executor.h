// Runs a DeviceProgram on the simulated NPU.
//
// ProgramRunner::run launches every step on the program's streams (events
// for cross-stream dependencies; all streams joined back to the device's
// default stream at the end, so the next call and eager work are ordered
// after it). The memory plan, evaluated dims and attributes are prepared
// once per concrete binding of the symbols and reused.
//
// ProgramRunner::replay (reduce-overhead) captures the launches of the
// first call per binding into a task graph, then replays it: inputs are
// rebound to the call's tensors (or copied into the captured ones), outputs
// get fresh storage each call, so earlier results are never overwritten.
//
// Thread safety: one call at a time per runner.
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/runtime/stream.h>
#include <npucache/tensor.h>

#include "compiler/memory_plan.h"
#include "compiler/program.h"

#include <map>
#include <memory>

namespace npucache {
class Communicator;
}

namespace npucache::compiler {

class ProgramRunner {
 public:
  ProgramRunner(std::shared_ptr<const DeviceProgram> program, int device);
  ~ProgramRunner();

  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const SymBindings& b,
                          Communicator& comm);
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const SymBindings& b,
                             Communicator& comm, InputHandling handling);

  // The plan for a binding (prepared on first use).
  const MemoryPlan& memory_plan(const SymBindings& b);
  std::size_t captured_graphs() const { return captured_.size(); }
  int device() const { return device_; }

 private:
  struct Prepared;
  struct Captured;
  Prepared& prepare(const SymBindings& b);
  // Issues every step; the blocks backing each buffer root are filled in.
  void launch_all(Prepared& prep, std::vector<runtime::BlockPtr>& blocks, Communicator& comm);
  // Storage for every buffer root; `intermediates` false skips the arena
  // and temporaries (a replay uses the captured ones).
  std::vector<runtime::BlockPtr> bind_blocks(Prepared& prep, const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& params, bool intermediates = true);
  std::vector<Tensor> make_outputs(const Prepared& prep, const std::vector<runtime::BlockPtr>& blocks) const;

  std::shared_ptr<const DeviceProgram> program_;
  int device_;
  std::unique_ptr<HappensBefore> hb_;
  std::vector<runtime::Stream*> streams_;
  std::map<std::vector<int64_t>, std::unique_ptr<Prepared>> prepared_;
  std::map<std::vector<int64_t>, std::unique_ptr<Captured>> captured_;
};

}  // namespace npucache::compiler
