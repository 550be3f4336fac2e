// MPI, wrapped once: an RAII communicator whose every operation is bounded
// in time. Only the files of src/mpi include <mpi.h>; everything above uses
// this.
//
// Bounded operations. Each operation takes a Step: a name (said in errors)
// and a time limit. Collectives run as MPI's non-blocking collectives
// (MPI_Iallgather, MPI_Ibcast, MPI_Igatherv, MPI_Iallreduce, MPI_Ibarrier,
// MPI_Comm_idup) and point-to-point transfers as MPI_Isend/MPI_Irecv, polled
// against the step's deadline. When the deadline passes, or another rank
// reports that its own step ran out of time, the rank joins a roll call
// (detail/fault.h): every rank that can still speak tells a few reporter
// ranks which step it is in, the reporters answer with who answered, and
// each rank throws TimeoutError naming the step and the ranks that did not
// answer (with their hosts when known). A timed-out communicator cannot be
// used again (MPI cannot cancel a collective): the job must end, which the
// npucache tools do with MPI_Abort. A step whose timeout is infinite still
// joins another rank's roll call.
//
// Communicator creation has no non-blocking form in MPI (MPI_Comm_split,
// MPI_Comm_split_type). split() and split_shared() first run a bounded
// barrier, so every member has arrived and the creation itself needs only
// ranks that were just seen alive; a rank that dies in the instant between
// would still block it, so the creation runs under a watchdog thread that,
// at the deadline, runs the same roll call, prints the error and aborts the
// job (the blocked call cannot be abandoned; nothing else can end it).
//
// Transfers of any size are split into chunks of kChunkBytes, below MPI's
// int counts. MPI failures throw CommError naming the MPI call.
//
// Tags: point-to-point operations use the caller's tag and tag + 1; the
// roll call uses tags 0x4e60-0x4e62 of MPI_COMM_WORLD (detail/fault.h).
//
// Thread safety: MPI is initialised with MPI_THREAD_MULTIPLE; one thread at
// a time per communicator. The roll call is run once per process, whichever
// thread times out first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace npucache::mpi {

// 256 MiB: far below MPI's 2^31-1 element counts, large enough that the
// per-call overhead is invisible next to the transfer.
constexpr std::size_t kChunkBytes = std::size_t{256} << 20;

// What a bounded operation is, for errors, and how long it may take.
struct Step {
  std::string name;
  double timeout_s = std::numeric_limits<double>::infinity();
};

class Comm {
 public:
  // MPI_COMM_WORLD; throws CommError when MPI is not initialised.
  static Comm world();
  Comm();  // invalid: a rank left out of a split
  ~Comm();
  Comm(Comm&&) noexcept;
  Comm& operator=(Comm&&) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool valid() const { return size_ > 0; }
  // The MPI_COMM_WORLD rank of this communicator's rank `r`.
  int world_rank(int r) const;

  // --- Communicators (collective) --------------------------------------
  // A copy with its own message space (MPI_Comm_idup).
  Comm dup(const Step& step) const;
  // color < 0 leaves this rank out (it gets an invalid Comm).
  Comm split(int color, int key, const Step& step) const;
  // The ranks that share this rank's memory (its host):
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), ordered by rank.
  Comm split_shared(const Step& step) const;

  // --- Collectives -------------------------------------------------------
  // Every rank's bytes, in rank order.
  std::vector<std::string> allgather(const std::string& mine, const Step& step) const;
  // `data` from `root` to every rank.
  void broadcast(std::string& data, int root, const Step& step) const;
  // Every rank's bytes at `root` (empty elsewhere).
  std::vector<std::string> gather(const std::string& mine, int root, const Step& step) const;
  void barrier(const Step& step) const;
  // Element-wise maximum over the ranks, in place (every rank the same length).
  void allreduce_max(std::vector<std::uint64_t>& values, const Step& step) const;

  // --- Point-to-point byte strings ------------------------------------------
  // Sends `data` to each of `dsts` (its size with `tag`, the bytes with
  // tag + 1) and waits until every send completed.
  void send_to(const std::vector<int>& dsts, int tag, const std::string& data, const Step& step) const;
  // One byte string from each of `srcs`, sent by send_to with `tag`.
  std::vector<std::string> recv_from(const std::vector<int>& srcs, int tag, const Step& step) const;
  // Sends `data` to `dst` while receiving from `src` (both with `tag`, as
  // send_to and recv_from), so ranks exchanging in a ring cannot deadlock.
  std::string sendrecv(const std::string& data, int dst, int src, int tag, const Step& step) const;

  // --- Typed operations of the runtime's communicator (kernels) ------------
  // In-place sum of `count` floats.
  void all_reduce_sum(float* data, std::size_t count, const Step& step) const;
  // out = every rank's `bytes` bytes, in rank order.
  void all_gather(const void* in, void* out, std::size_t bytes, const Step& step) const;
  void broadcast(void* data, std::size_t bytes, int root, const Step& step) const;
  void send(int dst, int tag, const void* data, std::size_t bytes, const Step& step) const;
  // Throws CommError when the sender sent another number of bytes.
  void recv(int src, int tag, void* data, std::size_t bytes, const Step& step) const;

 private:
  struct Handle;
  explicit Comm(std::unique_ptr<Handle> h);
  std::unique_ptr<Handle> h_;
  int rank_ = 0;
  int size_ = 0;
};

// Seconds on MPI's clock (MPI_Wtime).
double wtime();

// "rank 3", "ranks 0-3, 6": ranks for messages (sorted, ranges joined).
std::string rank_list(std::vector<int> ranks);

// Names the host of every world rank in timeout errors ("ranks 2, 3 on
// node1"); `hosts[r]` is world rank r's host. Set once the job knows them.
void set_host_names(std::vector<std::string> hosts);

}  // namespace npucache::mpi
