// Runs a DeviceProgram on the simulated NPU.
//
// ProgramRunner::run launches every step on the program's streams (events
// for cross-stream dependencies; all streams joined back to the device's
// default stream at the end, so the next call and eager work are ordered
// after it). The memory plan, evaluated dims and attributes are prepared
// once per concrete binding of the symbols and reused. Outputs get storage
// of their own every call.
//
// ProgramRunner::replay (reduce-overhead) captures the launches of the
// first call per binding (of the symbols that size buffers: a symbol used
// only by an updatable operator parameter, a decode step's KV length, is
// patched at each replay instead) into a task graph whose operands are slots -- the
// calling thread's pool of captured graphs (runtime/pool.h), each input,
// each parameter -- and replays it with the call's bindings, so arguments
// that swap, repeat or alias each other bind exactly as given. Intermediates
// and outputs live in the pool: an output stays valid until a later replay
// of the same thread reuses its memory; reading it after that is a
// DeviceError naming both calls (ReplayOptions::fresh_outputs copies outputs
// out instead). An input that lives in the pool (an output of an earlier
// replay fed back, `h = step(h)`) is staged into memory of its own before
// the kernels run; in copy mode every input is staged, and inputs the
// program updates in place (KV caches) are copied back after it: the
// caller's tensors are only ever written where the program writes them.
//
// Thread safety: run and replay may be called from several threads at once
// (a capture is made once per binding, other callers wait for it; replays
// of one captured graph run concurrently, each with its own bindings and
// its own thread's pool).
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/tensor.h>

#include "compiler/capture_template.h"
#include "compiler/memory_plan.h"
#include "compiler/program.h"
#include "runtime/stream.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace npucache {
class Communicator;
}

namespace npucache::compiler {

// The captures one method may make (CompileOptions::capture_limit), shared
// by the runners of all its entries. Thread-safe.
class CaptureBudget {
 public:
  CaptureBudget(std::size_t limit, std::shared_ptr<const std::string> method)
      : limit_(limit), method_(std::move(method)) {}
  // True when one more capture may be made (and counts it); false past the
  // limit, with one warning for the method.
  bool take();
  std::size_t made() const { return made_.load(); }
  std::size_t limit() const { return limit_; }

 private:
  const std::size_t limit_;
  std::shared_ptr<const std::string> method_;
  std::atomic<std::size_t> made_{0};
  std::atomic<bool> warned_{false};
};

struct ReplayOptions {
  InputHandling inputs = InputHandling::update_address;
  // Copy outputs into storage of their own (kept across later calls)
  // instead of returning the pool's memory.
  bool fresh_outputs = false;
  // Replay into the thread's scratch pool (pool.h), with fresh outputs: a
  // piece of a split method before its last, whose replay must not
  // overwrite results the rest of the method still reads.
  bool scratch_pool = false;
  // For messages about overwritten outputs: the method and its call number.
  std::shared_ptr<const std::string> method;
  uint64_t call = 0;
  // Limits the captures (null: no limit). Past it a new binding runs
  // uncaptured (run()).
  std::shared_ptr<CaptureBudget> budget;
};

class ProgramRunner {
 public:
  ProgramRunner(std::shared_ptr<const DeviceProgram> program, int device);
  ~ProgramRunner();

  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const SymBindings& b,
                          Communicator& comm);
  // `replayed` (when given) says whether a capture was replayed (false:
  // the capture budget was spent and the call ran uncaptured).
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const SymBindings& b,
                             Communicator& comm, const ReplayOptions& options = {}, bool* replayed = nullptr);

  // The plan for a binding (prepared on first use).
  const MemoryPlan& memory_plan(const SymBindings& b);
  std::size_t captured_graphs() const;
  // The bindings (of the symbols that size buffers) captured so far.
  std::vector<SymBindings> captured_bindings() const;
  // Pool bytes the capture of binding `b` uses (0 when not captured).
  std::size_t capture_footprint(const SymBindings& b) const;

  // Capture templates (capture_template.h): with a store, a binding not
  // captured yet is first looked up there and restored (no capture) when
  // the stored template is exactly what a capture here would make, and a
  // capture made here is saved to it. Set before the first replay.
  void set_templates(std::shared_ptr<TemplateStore> store) { templates_ = std::move(store); }
  // Captures binding `b` without a call (no tensors, no values: meta
  // weights) so that its template is saved: a warmup prepares a
  // reduce-overhead start. A template already stored is restored instead.
  void capture_template(const SymBindings& b, Communicator& comm);
  // Whether binding `b` is captured here (or restored) already.
  bool has_capture(const SymBindings& b) const;
  // Captures recorded here, templates restored, stored templates that could
  // not be used (and the latest reason).
  std::size_t captures() const { return captures_.load(); }
  std::size_t restores() const { return restores_.load(); }
  std::size_t recaptures() const { return recaptures_.load(); }
  std::string recapture_reason() const;
  int device() const { return device_; }

 private:
  struct Prepared;
  struct Captured;
  // Storage of a buffer root: a block and the offset the root starts at.
  struct Bound {
    runtime::BlockPtr block;
    std::size_t offset = 0;
  };
  Prepared& prepare(const SymBindings& b);
  // The binding without the update-only symbols: what a preparation and a
  // capture are made for.
  std::vector<int64_t> binding_key(const SymBindings& b) const;
  // The attributes of each patched step under `b`, from those `prep` (made
  // for `b`'s binding key) evaluated.
  std::vector<runtime::TaskGraph::Patch> patches(const Prepared& prep, const SymBindings& b) const;
  std::shared_ptr<const Attrs> patched_attrs(const Prepared& prep, std::size_t step, const SymBindings& b) const;
  // The pool plan a capture of binding `b` makes (no graph yet): where each
  // of its buffers lies in the pool.
  std::unique_ptr<Captured> pool_plan(const Prepared& prep, const SymBindings& b) const;
  // The template of a capture with that plan; the slots it declares.
  CaptureTemplate make_template(const Prepared& prep, const Captured& cap) const;
  void set_slots(Captured& cap, const CaptureTemplate& t) const;
  // Captures the program for binding `b` (caller holds mu_); `phantom`: no
  // pool memory (a template-only capture).
  Captured& capture(Prepared& prep, const std::vector<Bound>& io, Communicator& comm, const std::vector<int64_t>& key,
                    const SymBindings& b, bool phantom = false);
  // The stored template of binding `b` instantiated, or null (caller holds
  // mu_).
  Captured* restore(Prepared& prep, Communicator& comm, const std::vector<int64_t>& key, const SymBindings& b);
  void note_recapture(const std::string& why);
  TemplateSettings settings() const;
  // Issues every step; `roots` holds the storage of each buffer root.
  void launch_all(Prepared& prep, const std::vector<Bound>& roots, Communicator& comm, const SymBindings& b);
  // Storage of the inputs and parameters (checked against the program);
  // with `intermediates`, also a fresh arena, temporaries and outputs.
  std::vector<Bound> bind(Prepared& prep, const std::vector<Tensor>& inputs, const std::vector<Tensor>& params,
                          bool intermediates);
  std::vector<Tensor> make_outputs(const Prepared& prep, const std::vector<Bound>& roots) const;

  std::shared_ptr<const DeviceProgram> program_;
  int device_;
  std::unique_ptr<HappensBefore> hb_;
  std::vector<runtime::Stream*> streams_;
  // Symbols that appear only in updatable attributes (op_info().updatable:
  // a decode step's KV length), never in a buffer's shape or another
  // attribute: a preparation and a capture serve every value of them, and
  // the steps in `patched_` get their attributes evaluated per call (a
  // replay patches them).
  std::set<std::string> update_only_;
  std::vector<std::size_t> patched_;
  int rng_step_ = -1;      // the first step drawing random numbers (it cannot be captured), or -1
  mutable std::mutex mu_;  // guards prepared_ and captured_ (their values never move)
  std::map<std::vector<int64_t>, std::unique_ptr<Prepared>> prepared_;
  std::map<std::vector<int64_t>, std::unique_ptr<Captured>> captured_;
  std::shared_ptr<TemplateStore> templates_;
  std::atomic<std::size_t> captures_{0}, restores_{0}, recaptures_{0};
  mutable std::mutex reason_mu_;
  std::string recapture_reason_;
};

}  // namespace npucache::compiler
