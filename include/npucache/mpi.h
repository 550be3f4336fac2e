// MPI integration without exposing <mpi.h>.
//
// MpiSession initialises MPI (with MPI_THREAD_MULTIPLE, as stream workers
// issue collectives) for its lifetime, unless MPI was already initialised;
// MPI errors on MPI_COMM_WORLD then return to npucache, which throws
// CommError, instead of killing the job from inside MPI.
// Initialisation is bounded: in an mpirun launch of several ranks, MPI_Init
// waits for every rank, so a rank stopped or stalled before or during it
// would keep the others there for ever. When it has not completed within
// `init_timeout_s` (default: $NPUCACHE_INIT_TIMEOUT seconds, else 300; inf
// is unbounded), the rank prints on stderr which ranks never started it and
// which stopped inside it ("npucache: error on rank 0: MPI initialisation
// did not complete within 300 s: rank 3 has not started it ...") and exits
// with status 1, after which mpirun ends the job. Ranks are recognised
// through marks in $NPUCACHE_INIT_DIR (else $TMPDIR or /tmp) under
// npucache-init-<uid>; a job spanning hosts names the ranks of other hosts
// only when that directory is shared by the hosts.
// Destroyed while an exception unwinds a multi-rank job it does not
// finalize (that could wait forever on ranks still in a collective): the
// handler is expected to report and call abort().
// make_mpi_communicator builds the tp/pp/dp sub-communicators of
// MPI_COMM_WORLD for a layout and makes the result the calling thread's
// current communicator (set_current_communicator), which eager ops and
// compiled programs run by that thread use; destroying it unsets it. A
// collective run in a multi-rank job on a thread with no communicator is a
// CommError saying what to call, never a silent per-rank partial result.
#pragma once

#include <npucache/export.h>

#include <limits>
#include <memory>

#include <npucache/runtime/communicator.h>

namespace npucache {

class NPUCACHE_API MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  MpiSession(int* argc, char*** argv, double init_timeout_s);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static bool initialized();
  static int world_rank();
  static int world_size();
  // Terminates every rank of the job (MPI_Abort) with `code`.
  [[noreturn]] static void abort(int code);
  // Ends MPI normally after an error every rank has agreed on (so none is
  // left in a collective); the caller then exits with its status.
  static void finalize();

 private:
  bool owns_ = false;
};

// Throws ConfigError when tp*pp does not divide the MPI world size, or
// CommError when MPI is not initialised. `timeout_s` bounds the creation of
// the groups and each collective and pipeline transfer the communicator
// runs: one that does not complete in time throws TimeoutError naming the
// ranks that did not answer, after which the job must end (MPI cannot
// abandon a collective). Unbounded by default.
NPUCACHE_API std::unique_ptr<Communicator> make_mpi_communicator(
    int tp, int pp, double timeout_s = std::numeric_limits<double>::infinity());

}  // namespace npucache
