// What a rank does when a bounded MPI operation runs out of time (private
// to src/mpi; see mpi/comm.h for the contract).
//
// wait_all polls requests against a deadline. When the deadline passes, or
// another rank reports trouble, the rank joins the roll call: it tells the
// reporter ranks (world ranks 0, W/2 and W-1: with ranks placed host by
// host they sit on different hosts, so a whole host lost leaves one) which
// step it is in; a reporter alarms every rank (so ranks waiting in another
// step join at once rather than at their own deadline), collects answers
// for a short grace period and sends every rank the list of who answered.
// Each rank then throws TimeoutError naming the step and the ranks that did
// not answer. The roll call runs once per process: a second thread that
// times out gets the first one's verdict. Messages go over MPI_COMM_WORLD
// with tags kAlarmTag..kVerdictTag; the buffers of sends that are never
// waited for live until the process ends (it is about to be aborted).
#pragma once

#include "mpi/comm.h"

#include <mpi.h>

#include <functional>

namespace npucache::mpi::detail {

constexpr int kAlarmTag = 0x4e60;
constexpr int kHereTag = 0x4e61;
constexpr int kVerdictTag = 0x4e62;

// MPI_Wtime() + the step's timeout (+inf when unbounded).
double deadline_of(const Step& step);

// Polls `reqs` until every one completed (statuses filled when not
// MPI_STATUSES_IGNORE). At `deadline`, or when another rank reports a
// timeout, runs the roll call and throws TimeoutError.
void wait_all(MPI_Request* reqs, int n, const Step& step, double deadline, MPI_Status* statuses = MPI_STATUSES_IGNORE);

// The roll call for `step` (this rank's own deadline passed when
// `timed_out`, else it joined another rank's), then TimeoutError.
[[noreturn]] void fail(const Step& step, bool timed_out);

// Ends the job (MPI_Abort) with `code`. Other threads of this process that
// wait in a bounded operation stop calling MPI first (they sleep until the
// end): Open MPI tears its state down in MPI_Abort under their feet.
[[noreturn]] void abort_job(int code);

// Runs `fn`, a blocking MPI call with no non-blocking form. If it has not
// returned at the step's deadline, a watchdog thread runs the roll call,
// prints the error on stderr and aborts the job (MPI_Abort): the blocked
// call cannot be abandoned.
void run_watched(const Step& step, const std::function<void()>& fn);

}  // namespace npucache::mpi::detail
