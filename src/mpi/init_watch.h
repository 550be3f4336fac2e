// InitWatch: bounds MPI initialisation (private to src/mpi; used by
// MpiSession).
//
// MPI_Init of a job launched by mpirun waits, inside MPI, for every rank
// (Open MPI's start-up fence): a rank stopped (SIGSTOP) or stalled before or
// during it, or one on a slow node, would keep the others there for ever,
// and MPI offers no way out before it is initialised. An InitWatch, made
// just before MPI_Init, marks this rank's arrival with a file
// <dir>/<job>/<rank> (dir: $NPUCACHE_INIT_DIR, else $TMPDIR, else /tmp,
// plus npucache-init-<uid>; job: the launch's PMIx namespace, else Open
// MPI's job id) and refreshes its time every half second from a thread. If
// it is still alive `timeout_s` after it was made, the thread prints on
// stderr
//
//   npucache: error on rank R: MPI initialisation did not complete within T s:
//   rank 3 has not started it (not running, stopped before it, or on a slow node) ...
//
// naming the ranks with no mark (never arrived) and with a mark not
// refreshed for 2 s (stopped or stalled during it), and ends the process
// (_exit status 1, nothing else runs: MPI is half initialised); mpirun then
// ends the others. It also leaves an alarm file <dir>/<job>/expired, which
// the watches of the other ranks on this host see within half a second, so
// every rank that can still run prints the same error at about the same
// moment instead of being cut off by mpirun. Ranks on other hosts are seen
// only when the directory is shared by the hosts (whose clocks must then
// agree within a second: marks are compared in wall-clock time); the
// message says so when the job spans hosts. A watch that finds its own process was stopped (its
// thread woke far too late: SIGSTOP, then the SIGCONT of mpirun ending the
// job), or that starts after the others gave up on it (stopped before it
// started, continued by mpirun), says so rather than naming others. The rank, world size and job come from the
// environment mpirun gives every process (OMPI_COMM_WORLD_RANK or
// PMIX_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE,
// PMIX_NAMESPACE or OMPI_MCA_orte_ess_jobid), since MPI cannot be asked
// before it is initialised. Destroyed (MPI_Init returned, which it does
// only after every rank arrived), it stops the thread, removes the mark and
// the job's directory once empty.
//
// Inactive (no thread, no file) outside an mpirun launch of more than one
// rank, or when `timeout_s` is not finite. A directory that is not this
// user's own (a planted link, another owner, writable by others) is not
// used: the watch still ends the process in time, naming no ranks. The
// marks of a job that gave up (its alarm a minute old) or ended without
// cleaning up (killed: every file an hour old) are removed by the next
// watch to start.
//
// Thread safety: one InitWatch per process (MpiSession's); its thread only
// reads its own members and the files.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace npucache::mpi {

class InitWatch {
 public:
  explicit InitWatch(double timeout_s);
  ~InitWatch();
  InitWatch(const InitWatch&) = delete;
  InitWatch& operator=(const InitWatch&) = delete;

  // Whether the watch runs (an mpirun launch of several ranks, a finite
  // timeout).
  bool active() const { return thread_.joinable(); }

 private:
  void run();
  // Whether another rank's watch on this host gave up; sets its rank and
  // timeout, and alarm_at_.
  bool alarmed(int* by, double* timeout_s);
  [[noreturn]] void expire(int by, double timeout_s) const;
  // Which ranks have no mark or a stale one, in words.
  std::string missing() const;

  double timeout_s_ = 0;
  int rank_ = 0;
  int size_ = 1;
  bool multi_host_ = false;
  std::string host_;
  double started_ = 0;    // wall-clock seconds when made (marks are compared in wall time)
  std::string where_;     // the directory of marks, for messages
  std::string unusable_;  // why there are no marks ("" when there are)
  int dir_fd_ = -1;       // the job's directory of marks
  int mark_fd_ = -1;      // this rank's mark
  double stalled_s_ = 0;  // the longest this process stood still (its thread's own)
  double alarm_at_ = 0;   // when the alarm it saw was raised (wall clock; its thread's own)
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The bound MpiSession applies by default: $NPUCACHE_INIT_TIMEOUT seconds
// when set to a positive number (inf: unbounded), else 300. Any other value
// is warned about and the default used.
double default_init_timeout();

}  // namespace npucache::mpi
