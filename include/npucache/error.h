// Exception types thrown across npucache's public API.
//
// Contract: every error a user can cause (bad shapes, bad configuration, a
// missing device, a failed collective) is reported by throwing one of these,
// with a message that names what was wrong and what to do about it. A cache
// miss is never an error. Internal invariant violations are reported as
// npucache::Error too, never by assert or abort.
#pragma once

#include <npucache/export.h>

#include <stdexcept>
#include <string>

namespace npucache {

class NPUCACHE_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An op was given operands whose dtypes or shapes it cannot accept.
class NPUCACHE_API ShapeError : public Error {
 public:
  using Error::Error;
};

// A graph failed verification (names the node, op and offending types).
class NPUCACHE_API VerifyError : public Error {
 public:
  using Error::Error;
};

// A method could not be traced into one full graph.
class NPUCACHE_API TraceError : public Error {
 public:
  using Error::Error;
};

// What cannot be put in one graph: a read of a tensor's value on the host,
// a data-dependent branch (a tensor's truth value deciding control flow),
// an op the mode cannot lower (random numbers in a captured or cached
// graph). With CompileOptions::fullgraph=false the method is split there
// (a graph break, counted and explained in CallStatus::graph_breaks); with
// fullgraph=true it is this error, giving the reason.
class NPUCACHE_API GraphBreakError : public TraceError {
 public:
  enum class Kind { host_read, data_dependent_branch, unlowerable_op };
  // "graph break [in <method>] at op <op>: <reason>"
  GraphBreakError(Kind kind, std::string op, std::string reason, const std::string& method = "")
      : TraceError("graph break" + (method.empty() ? std::string() : " in " + method) + " at op " + op + ": " + reason),
        kind_(kind),
        op_(std::move(op)),
        reason_(std::move(reason)) {}
  Kind kind() const { return kind_; }
  const std::string& op() const { return op_; }
  const std::string& reason() const { return reason_; }

 private:
  Kind kind_;
  std::string op_, reason_;
};

// Misuse of the simulated device runtime (bad device id, foreign stream...).
class NPUCACHE_API DeviceError : public Error {
 public:
  using Error::Error;
};

// A device allocation exceeded the device's memory capacity.
class NPUCACHE_API OutOfMemoryError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// A collective or point-to-point communication failed or was misused.
class NPUCACHE_API CommError : public Error {
 public:
  using Error::Error;
};

// A bounded collective or transfer did not complete within the job's
// timeout: some rank stopped, crashed, was cut off, or is running something
// else. The message names the step and the ranks that did not answer. The
// communicator it ran on is unusable afterwards (MPI cannot cancel a
// collective), so the job must end: the npucache tools abort it.
class NPUCACHE_API TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

// The compile cache could not be read or written, or refused a file
// (corrupt, stale, foreign-owned or symlinked). Never thrown for a miss.
class NPUCACHE_API CacheError : public Error {
 public:
  using Error::Error;
};

// A cache file or directory was refused for safety (a symbolic link, owned
// by another user, writable by others): the method runs uncached.
class NPUCACHE_API CacheRefused : public CacheError {
 public:
  using CacheError::CacheError;
};

// A meta tensor (Tensor::meta: a type without memory, such as a parameter of
// a model built with meta weights) was run, read or written outside a
// trace. Meta tensors can be traced and compiled, never executed; the
// message names the tensor and says to materialise the weights.
class NPUCACHE_API MetaTensorError : public Error {
 public:
  using Error::Error;
};

// An invalid option or configuration value.
class NPUCACHE_API ConfigError : public Error {
 public:
  using Error::Error;
};

}  // namespace npucache
