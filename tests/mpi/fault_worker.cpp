// A rank that never joins: each bounded operation of mpi::Comm must end, on
// every other rank, in a TimeoutError naming the step and the missing rank
// within the timeout (plus the roll call's grace), never a hang.
//   mpirun -np N fault_worker OP VICTIM TIMEOUT_S
// OP: allgather broadcast gather barrier allreduce recv dup split
// split_shared watchdog. Every rank but VICTIM runs OP; VICTIM sleeps (as a
// stopped rank would). A rank that gets the error prints
// "fault_worker rank R: <message>" and the job is aborted (exit 3);
// "watchdog" runs a blocking MPI_Barrier under the watchdog, which prints
// and aborts by itself.
// MPI initialisation (MpiSession's bound, $NPUCACHE_INIT_TIMEOUT):
//   init          every rank initialises MPI; run with a launch wrapper
//                 that stops VICTIM before the program starts
//   stop_in_init  VICTIM marks its arrival at MPI initialisation (the
//                 InitWatch MpiSession makes, bounded by TIMEOUT_S) and
//                 stops itself (SIGSTOP) before MPI_Init completes
// Ranks that initialise without VICTIM print so and exit 1.
#include <npucache/error.h>
#include <npucache/mpi.h>

#include "mpi/comm.h"
#include "mpi/detail/fault.h"
#include "mpi/init_watch.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace npucache;

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "stop_in_init") {
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (r && std::atoi(r) == std::atoi(argv[2])) {
      mpi::InitWatch watch(std::stod(argv[3]));
      std::raise(SIGSTOP);
      return 0;
    }
  }
  MpiSession session(&argc, &argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: fault_worker OP VICTIM TIMEOUT_S\n");
    return 2;
  }
  const std::string op = argv[1];
  const int victim = std::stoi(argv[2]);
  if (op == "init" || op == "stop_in_init") {
    std::printf("fault_worker rank %d: MPI initialised without rank %d\n", MpiSession::world_rank(), victim);
    return 1;
  }
  const mpi::Step step{"test " + op, std::stod(argv[3])};
  const mpi::Comm world = mpi::Comm::world();
  const int me = world.rank();
  if (me == victim) {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
  }
  try {
    std::string s = "x";
    std::vector<std::uint64_t> v{1};
    if (op == "allgather")
      world.allgather(s, step);
    else if (op == "broadcast")
      world.broadcast(s, victim, step);
    else if (op == "gather")
      world.gather(s, victim == 0 ? 1 : 0, step);
    else if (op == "barrier")
      world.barrier(step);
    else if (op == "allreduce")
      world.allreduce_max(v, step);
    else if (op == "recv")
      world.recv_from({victim}, 7, step);
    else if (op == "dup")
      world.dup(step);
    else if (op == "split")
      world.split(0, me, step);
    else if (op == "split_shared")
      world.split_shared(step);
    else if (op == "watchdog")
      mpi::detail::run_watched(step, [] { MPI_Barrier(MPI_COMM_WORLD); });
    else {
      std::fprintf(stderr, "fault_worker: unknown op %s\n", op.c_str());
      MpiSession::abort(2);
    }
    std::printf("fault_worker rank %d: %s completed without rank %d\n", me, op.c_str(), victim);
    return 1;
  } catch (const TimeoutError& e) {
    std::printf("fault_worker rank %d: %s\n", me, e.what());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MpiSession::abort(3);
  }
}
