// Collective and point-to-point communication between the ranks of a job.
//
// Ranks are arranged Megatron-style: global rank = dp_index * (pp * tp) +
// pp_index * tp + tp_index (tensor-parallel fastest). A Communicator serves
// the groups of one rank: `tp` (same pp and dp index), `pp` (same tp and dp
// index), `dp` (same tp and pp index) and `world`. Pipeline send/recv go to
// the relative next/previous stage of the rank's pp group.
//
// Implementations: single-process (every group has one rank; point-to-point
// has no peer and throws) and MPI (mpi.h). All ranks of a group must call
// the same collectives in the same order, as with MPI.
//
// Thread safety: calls may come from a stream worker thread; one call at a
// time per communicator.
#pragma once

#include <npucache/export.h>

#include <cstddef>
#include <memory>
#include <string>

namespace npucache {

enum class GroupRole { world, tp, pp, dp };
NPUCACHE_API std::string_view group_role_name(GroupRole g);
// "tp", "pp", "dp", "world"; throws CommError for anything else.
NPUCACHE_API GroupRole group_role_from_name(std::string_view name);

struct NPUCACHE_API ParallelLayout {
  int world_size = 1;
  int tp = 1;
  int pp = 1;

  int dp() const { return world_size / (tp * pp); }
  // Throws ConfigError when tp*pp does not divide the world size.
  void validate() const;
  int tp_rank(int global_rank) const { return global_rank % tp; }
  int pp_rank(int global_rank) const { return (global_rank / tp) % pp; }
  int dp_rank(int global_rank) const { return global_rank / (tp * pp); }
  int global_rank(int tp_rank, int pp_rank, int dp_rank) const { return dp_rank * tp * pp + pp_rank * tp + tp_rank; }
};

enum class PipelinePeer { next, prev };

class NPUCACHE_API Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const ParallelLayout& layout() const = 0;
  virtual int global_rank() const = 0;
  virtual int rank(GroupRole group) const = 0;
  virtual int size(GroupRole group) const = 0;

  // In-place sum over the group.
  virtual void all_reduce_sum(GroupRole group, float* data, std::size_t count) = 0;
  // out = concatenation of every rank's `bytes` bytes, in group rank order.
  virtual void all_gather(GroupRole group, const void* in, void* out, std::size_t bytes) = 0;
  virtual void broadcast(GroupRole group, int root, void* data, std::size_t bytes) = 0;
  virtual void barrier(GroupRole group) = 0;
  // To/from the next or previous pipeline stage; throws CommError when the
  // rank has no such stage (the first stage has no prev, the last no next).
  virtual void send(PipelinePeer peer, const void* data, std::size_t bytes) = 0;
  virtual void recv(PipelinePeer peer, void* data, std::size_t bytes) = 0;
};

NPUCACHE_API std::unique_ptr<Communicator> make_single_process_communicator();

// The communicator that collectives run by this thread use (eager ops and
// compiled programs); default: a single-process one. Not owned.
NPUCACHE_API Communicator& current_communicator();
NPUCACHE_API void set_current_communicator(Communicator* comm);

}  // namespace npucache
