// A captured graph as a relocatable template: what a reduce-overhead
// capture of one program under one binding of its sizes produced -- the
// task list (each task a program step: its op, its operands' dtypes and
// dims), every device address as (slot, offset) where slot 0 is the pool of
// captured graphs and the others the call's inputs and the module's
// parameters (so the rank-specific addresses, the device and the
// communicator are bound at replay, never recorded), the pool's footprint
// and layout. A template is stored with its program (docs/FORMAT.md,
// "Capture templates") so that a warm start instantiates it instead of
// capturing again; the TP ranks of a stage, which run one program, share
// one template.
//
// A template is data from outside the process: decode_template() trusts no
// count or length, and ProgramRunner::restore() accepts one only when every
// task, operand and offset is what a capture of the program would produce
// (a recapture with the reason otherwise), so a stale or crafted template
// is never replayed.
#pragma once

#include <npucache/ir/symbolic.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::compiler {

struct CaptureTemplate {
  struct Operand {
    uint32_t slot = 0;    // 0 the pool, 1.. the inputs, then the parameters
    uint64_t offset = 0;  // bytes past the slot's base
    uint32_t dtype = 0;
    std::vector<int64_t> dims;
    friend bool operator==(const Operand&, const Operand&) = default;
  };
  struct Task {
    uint32_t op = 0;
    std::vector<Operand> operands;  // the op's inputs, then its result
    friend bool operator==(const Task&, const Task&) = default;
  };
  SymBindings binding;               // the sizes it was captured for
  uint64_t footprint = 0;            // pool bytes it writes: [0, footprint)
  std::vector<int64_t> pool_offset;  // per program buffer: its offset in the pool, or -1
  std::vector<Task> tasks;           // one per program step
  friend bool operator==(const CaptureTemplate&, const CaptureTemplate&) = default;
};

// Bounds of what is decoded: far above any program's.
inline constexpr std::size_t kMaxTemplateTasks = std::size_t{1} << 20;
inline constexpr std::size_t kMaxTemplateBytes = std::size_t{1} << 30;

std::string encode_template(const CaptureTemplate& t);
// Throws Error naming what is wrong (counts, enums, trailing bytes).
CaptureTemplate decode_template(std::string_view bytes);
// 32 hex digits of the encoding: equal templates, equal fingerprints.
std::string template_fingerprint(const CaptureTemplate& t);
// The fingerprint of an encoding as it is: equals template_fingerprint of
// its decoding exactly when the encoding is canonical (encode_template's),
// which a stored template's is; a reader compares it to skip re-encoding.
std::string encoding_fingerprint(std::string_view bytes);
// "s0=4,s1=16"
std::string binding_text(const SymBindings& b);

// The settings of the device and its allocator a template depends on
// (with the program, the sizes, runtime and format versions).
struct TemplateSettings {
  uint64_t device_memory = 0;  // the device's memory capacity
  uint64_t pool_align = 0;     // alignment of buffers in the pool
};

// Where the templates of one compiled program are kept (the cache, by its
// graph key and everything a template is valid for). Thread-safe.
class TemplateStore {
 public:
  virtual ~TemplateStore() = default;
  // The stored template for `binding`, or nullopt (with `why` saying what
  // was found instead when there was something: settings or a runtime that
  // differ, damage).
  virtual std::optional<std::string> load(const SymBindings& binding, const TemplateSettings& settings,
                                          std::string& why) = 0;
  // Stores a template made by a capture (a failure is logged, never thrown).
  virtual void save(const SymBindings& binding, const TemplateSettings& settings, const std::string& bytes) = 0;
  // What the runner did with a binding: restored its template, or
  // recaptured because the stored one could not be used, for `cause`
  // (recapture_cause; statistics).
  virtual void note(bool restored, bool recaptured, const std::string& cause = "") {
    (void)restored;
    (void)recaptured;
    (void)cause;
  }
};

// The reason of a recapture as a word (the statistics' key): what differs
// ("device_memory", "runtime_version", "format_version", "pool_align",
// "sizes"), "damaged" (the file fails its checks), "mismatch" (it is not
// what a capture of the program here records) or "other"; from the text a
// TemplateStore's load or the runner gives ("device memory: stored ...").
std::string recapture_cause(std::string_view why);

}  // namespace npucache::compiler
