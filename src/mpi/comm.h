// MPI, wrapped once: an RAII communicator with checked, chunked operations.
// Only the files of src/mpi include <mpi.h>; everything above uses this.
//
// Byte-string collectives serve the coordinator (records, artifacts); the
// typed ones serve the runtime's MPI communicator (kernels). Transfers of
// any size are split into chunks of kChunkBytes, below MPI's int counts.
// Failures throw CommError naming the MPI call.
//
// Thread safety: MPI is initialised with MPI_THREAD_MULTIPLE; one thread at
// a time per communicator.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace npucache::mpi {

// 256 MiB: far below MPI's 2^31-1 element counts, large enough that the
// per-call overhead is invisible next to the transfer.
constexpr std::size_t kChunkBytes = std::size_t{256} << 20;

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

  // Collective; color < 0 leaves this rank out (it gets an invalid Comm).
  Comm split(int color, int key) const;

  // Every rank's bytes, in rank order.
  std::vector<std::string> allgather(const std::string& mine) const;
  // `data` from `root` to every rank.
  void broadcast(std::string& data, int root) const;
  // Every rank's bytes at `root` (empty elsewhere).
  std::vector<std::string> gather(const std::string& mine, int root) const;
  void barrier() const;

  // Waits until every rank called arrive() with the same `tag`, at most
  // `timeout_s`. Throws CommError naming the ranks that did not arrive (or
  // that rank 0 did not answer) when the time runs out.
  void arrive(int tag, double timeout_s, const std::string& what) const;

  // In-place sum of `count` floats.
  void all_reduce_sum(float* data, std::size_t count) const;
  // out = every rank's `bytes` bytes, in rank order.
  void all_gather(const void* in, void* out, std::size_t bytes) const;
  void broadcast(void* data, std::size_t bytes, int root) const;
  void send(int dst, int tag, const void* data, std::size_t bytes) const;
  // Throws CommError when the sender sent another number of bytes.
  void recv(int src, int tag, void* data, std::size_t bytes) const;

 private:
  struct Handle;
  explicit Comm(std::unique_ptr<Handle> h);
  std::unique_ptr<Handle> h_;
  int rank_ = 0;
  int size_ = 0;
};

// Seconds on MPI's clock (MPI_Wtime).
double wtime();

}  // namespace npucache::mpi
