// MpiSession: MPI's lifetime in a process (include/npucache/mpi.h).
#include <npucache/mpi.h>

#include "mpi/check.h"
#include "mpi/detail/fault.h"
#include "mpi/init_watch.h"
#include "process/context.h"

#include <cstdlib>
#include <exception>

namespace npucache {
namespace {

process::World world_probe() {
  if (!MpiSession::initialized()) return {};
  return {MpiSession::world_rank(), MpiSession::world_size(), true};
}
// Registered when the library loads: the process context knows the job's
// world (process/context.h) without any other layer asking MPI, and the
// runtime can tell a collective run without a communicator in a multi-rank
// job (runtime/process.h).
const bool g_probe_registered = (process::set_world_probe(&world_probe), true);

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) : MpiSession(argc, argv, mpi::default_init_timeout()) {}

MpiSession::MpiSession(int* argc, char*** argv, double init_timeout_s) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  int provided = 0;
  {
    // MPI_Init waits for every rank of the launch: bounded, so a rank that
    // never arrives ends the job with its name instead of a hang.
    mpi::InitWatch watch(init_timeout_s);
    mpi::check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  }
  owns_ = true;
  // Errors come back as codes (mpi::check throws CommError with MPI's
  // text); communicators made from the world inherit it.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Unwinding an error: MPI_Finalize would wait for ranks that may still be
  // in a collective; the handler aborts the job instead.
  if (std::uncaught_exceptions() > 0 && world_size() > 1) return;
  if (owns_ && !finalized) MPI_Finalize();
}

bool MpiSession::initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int MpiSession::world_rank() {
  int r = 0;
  if (initialized()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int MpiSession::world_size() {
  int s = 1;
  if (initialized()) MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void MpiSession::finalize() {
  if (initialized()) MPI_Finalize();
}

void MpiSession::abort(int code) { mpi::detail::abort_job(code); }

}  // namespace npucache
