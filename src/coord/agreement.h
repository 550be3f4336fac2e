// The coordinator's one agreement: after each phase in which a rank can
// fail on its own (phase.h: arrival, plan, compile, exchange and load,
// persist), every rank reaches the same outcome within the timeout,
// instead of the others waiting for the failed rank until it.
//
// A rank whose own work fails still takes part in the agreement, carrying
// the failure (LocalFailure). A failure is survivable or fatal:
// - survivable: this rank's cache cannot be used or written, and the rank
//   can still run the method -- a cache refused at the lookup
//   (MissReason::refused), a store that cannot be used (the plan), a
//   CacheError of a save (CacheRefused included: a refused, read-only or
//   full directory at a store's writer); the protocol goes on;
// - fatal: anything else (a trace that fails, a compile error, a program
//   that does not load or is damaged in transit, a ConfigError), and any
//   failure that leaves a rank without its program.
// From what every rank carried, every rank decides the same way:
// - no rank failed: the protocol goes on;
// - some failure is fatal: every rank throws. When every rank failed
//   fatally each rethrows its own exception, unchanged (a graph break on
//   every rank stays a GraphBreakError, so every rank splits the method
//   alike); otherwise every rank, the failed ones included, throws the same
//   error, of the class of the lowest fatally failed rank's exception
//   (ConfigError, TraceError, ShapeError, VerifyError, DeviceError,
//   MetaTensorError, CacheError; any other is an Error: never a CommError
//   string), naming that rank, the phase and the cause, and how many ranks
//   failed;
// - only survivable failures: every rank goes on, uncached for the method
//   (Agreed::survivable), and warns once, naming the lowest failed rank,
//   the phase and the cause.
//
// agree() costs one all-reduce of one integer when nothing failed; the
// failures travel (one all-gather) only when some rank failed. A phase
// whose own collective can carry the flag (the arrival's all-reduce) or the
// failure (the plan's key all-gather) passes it there and decides with
// agree_reduced() or decide(), adding no collective.
//
// Thread safety: plain values; the functions share no state.
#pragma once

#include "coord/phase.h"
#include "coord/transport.h"

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace npucache::coord {

// What the ranks agreed on when the protocol goes on.
struct Agreed {
  bool survivable = false;  // some rank failed survivably: every rank goes on uncached
  int rank = -1;            // the lowest such rank
  Phase phase = Phase::arrival;
  std::string cause;
  int failed = 0;  // how many ranks failed
  // "cache_compile of M: rank 3 failed in phase persist (saving the
  // entries): <cause>; every rank runs M uncached"
  std::string warning(const std::string& method) const;
};

class LocalFailure {
 public:
  enum class Severity : std::uint64_t { none = 0, survivable = 1, fatal = 2 };

  LocalFailure() = default;
  // The exception being handled (call inside a catch block), in `phase`:
  // fatal, unless `cache_errors_survivable` (a save) and it is a CacheError.
  static LocalFailure current(Phase phase, bool cache_errors_survivable = false);
  // A survivable failure that is no exception (a cache refused at the
  // lookup): `cause` says what.
  static LocalFailure survivable(Phase phase, std::string cause);

  bool failed() const { return severity_ != Severity::none; }
  Severity severity() const { return severity_; }
  // What this rank contributes to an all-reduce (max) of the flags.
  std::uint64_t flag() const { return static_cast<std::uint64_t>(severity_); }
  // What other ranks need to decide and name it: "" when nothing failed.
  std::string encode() const;

 private:
  friend Agreed decide(const std::vector<std::string>& all, const LocalFailure& mine, int me,
                       const std::string& method);
  Severity severity_ = Severity::none;
  Phase phase_ = Phase::arrival;
  std::exception_ptr original_;  // fatal: this rank's own exception
  char kind_ = 'E';
  std::string what_;
};

// Decides from every rank's encode() (indexed by rank), as above: throws
// (the same on every rank) when some failure is fatal, else returns.
// `mine` is this rank's failure, `me` this rank.
Agreed decide(const std::vector<std::string>& all, const LocalFailure& mine, int me, const std::string& method);

// The agreement over `net`: one all-reduce of the flags (step "<name>"),
// and only when some rank failed the all-gather of the failures (step
// "<name>: naming the failures") and decide().
Agreed agree(const Transport& net, const LocalFailure& mine, const std::string& method, const mpi::Step& step);
// The same when the flags were already reduced into `reduced_flag` by
// another all-reduce.
Agreed agree_reduced(std::uint64_t reduced_flag, const Transport& net, const LocalFailure& mine,
                     const std::string& method, const mpi::Step& step);

}  // namespace npucache::coord
