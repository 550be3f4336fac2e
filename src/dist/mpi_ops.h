// The MPI operations the coordinator needs, wrapped once and checked:
// a deadline-bounded arrival handshake, variable-size all-gathers, chunked
// broadcasts in sub-communicators, and gathers to one rank. Only src/dist
// and src/runtime/mpi_communicator.cpp include <mpi.h>.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace npucache::dist {

// A communicator: MPI_COMM_WORLD or a split of it (freed on destruction).
class Comm {
 public:
  static Comm world();
  ~Comm();
  Comm(Comm&&) noexcept;
  Comm& operator=(Comm&&) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool valid() const { return size_ > 0; }

  // Collective split; color < 0 leaves this rank out (returns an invalid Comm).
  Comm split(int color, int key) const;

  // Every rank's bytes, in rank order.
  std::vector<std::string> allgather(const std::string& mine) const;
  // `data` from `root` to all (any size: sent in chunks of at most 256 MiB).
  void broadcast(std::string& data, int root) const;
  // Every rank's bytes at `root` (empty elsewhere).
  std::vector<std::string> gather(const std::string& mine, int root) const;
  void barrier() const;

  // Waits until every rank of this communicator called arrive() with the
  // same `tag`, at most `timeout_s`. Throws CommError naming the ranks that
  // did not arrive (or that rank 0 did not answer) when the time runs out.
  void arrive(int tag, double timeout_s, const std::string& what) const;

 private:
  struct Handle;
  explicit Comm(std::unique_ptr<Handle> h);
  std::unique_ptr<Handle> h_;
  int rank_ = 0;
  int size_ = 0;
};

// MPI_Wtime
double wtime();

}  // namespace npucache::dist
