// The outside world, as leveldb's Env: every file-system call of the store
// and every clock reading of the library go through one Env, so that tests
// replace it (tests/support/fault_env.h) to inject faults -- a full disk
// at the Nth write, an I/O error, short reads, a slow clock -- without
// root tricks or timing luck. The process context (context.h) holds the
// Env in use; default_env() is the real one (POSIX calls, the system
// clocks).
//
// Thread safety: an Env is used from every thread at once.
#pragma once

#include <memory>

namespace npucache::process {

class Env {
 public:
  virtual ~Env() = default;

  // --- Clocks ---------------------------------------------------------------
  // Seconds on a monotonic clock (deadlines, durations).
  virtual double monotonic_s();
  // Seconds since the Unix epoch (dates, last use).
  virtual double wall_s();
};

// The real world: POSIX calls and the system clocks.
std::shared_ptr<Env> default_env();

}  // namespace npucache::process
