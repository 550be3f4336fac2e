// A failure of one rank's own work that every rank of a coordinated call
// agrees on, instead of the others waiting for it until the timeout.
//
// A rank whose local work fails (tracing its call, the hit check) still
// takes part in the next collective of the protocol, carrying the failure;
// then every rank decides the same way from what all of them carried:
// - no rank failed: the protocol goes on;
// - every rank failed: each rethrows its own exception, unchanged (a graph
//   break on every rank stays a GraphBreakError, so every rank splits the
//   method alike; a ConfigError stays a ConfigError);
// - some ranks failed: every rank, the failed ones included, throws the
//   same error, of the class of the lowest failed rank's exception
//   (ConfigError, TraceError, ShapeError, VerifyError, DeviceError,
//   MetaTensorError, CacheError; any other is an Error), naming that rank,
//   the phase and the cause, and how many ranks failed.
// Thread safety: plain values; the functions have no shared state.
#pragma once

#include <exception>
#include <string>
#include <vector>

namespace npucache::coord {

class LocalFailure {
 public:
  LocalFailure() = default;
  // The exception being handled (call inside a catch block).
  static LocalFailure current();

  bool failed() const { return original_ != nullptr; }
  // What other ranks need to name it: "" when nothing failed.
  std::string encode() const;

  // Decides from every rank's encode() (indexed by rank), as above:
  // returns when no rank failed, throws otherwise. `me` is this rank,
  // `phase` names the step ("tracing the call and checking the cache").
  [[noreturn]] void throw_agreed(const std::vector<std::string>& all, int me, const std::string& method,
                                 const std::string& phase) const;
  void agree(const std::vector<std::string>& all, int me, const std::string& method, const std::string& phase) const;

 private:
  std::exception_ptr original_;
  char kind_ = 'E';
  std::string what_;
};

}  // namespace npucache::coord
