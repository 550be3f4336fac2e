// The runtime's Communicator over MPI: the tp, pp and dp groups of a
// Megatron layout as sub-communicators of MPI_COMM_WORLD.
#include <npucache/error.h>
#include <npucache/mpi.h>

#include "mpi/comm.h"

#include <mutex>

namespace npucache {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int tp, int pp, double timeout_s) : world_(mpi::Comm::world()), timeout_s_(timeout_s) {
    rank_ = world_.rank();
    layout_ = ParallelLayout{world_.size(), tp, pp};
    layout_.validate();
    const int t = layout_.tp_rank(rank_), p = layout_.pp_rank(rank_), d = layout_.dp_rank(rank_);
    // color = the coordinates the group shares; key = position within it.
    tp_ = world_.split(p + pp * d, t, step("creating the tp groups"));
    pp_ = world_.split(t + tp * d, p, step("creating the pp groups"));
    dp_ = world_.split(t + tp * p, d, step("creating the dp groups"));
  }

  ~MpiCommunicator() override {
    if (&current_communicator() == this) set_current_communicator(nullptr);
  }

  const ParallelLayout& layout() const override { return layout_; }
  int global_rank() const override { return rank_; }
  int rank(GroupRole g) const override {
    switch (g) {
      case GroupRole::world: return rank_;
      case GroupRole::tp: return layout_.tp_rank(rank_);
      case GroupRole::pp: return layout_.pp_rank(rank_);
      case GroupRole::dp: return layout_.dp_rank(rank_);
    }
    return 0;
  }
  int size(GroupRole g) const override {
    switch (g) {
      case GroupRole::world: return layout_.world_size;
      case GroupRole::tp: return layout_.tp;
      case GroupRole::pp: return layout_.pp;
      case GroupRole::dp: return layout_.dp();
    }
    return 1;
  }

  void all_reduce_sum(GroupRole g, float* data, std::size_t count) override {
    std::lock_guard lock(mu_);
    comm(g).all_reduce_sum(data, count, step(g, "all-reduce"));
  }

  void all_gather(GroupRole g, const void* in, void* out, std::size_t bytes) override {
    std::lock_guard lock(mu_);
    comm(g).all_gather(in, out, bytes, step(g, "all-gather"));
  }

  void broadcast(GroupRole g, int root, void* data, std::size_t bytes) override {
    if (root < 0 || root >= size(g))
      throw CommError("broadcast root " + std::to_string(root) + " is not in the " + std::string(group_role_name(g)) +
                      " group of " + std::to_string(size(g)));
    std::lock_guard lock(mu_);
    comm(g).broadcast(data, bytes, root, step(g, "broadcast"));
  }

  void barrier(GroupRole g) override {
    std::lock_guard lock(mu_);
    comm(g).barrier(step(g, "barrier"));
  }

  void send(PipelinePeer peer, const void* data, std::size_t bytes) override {
    const int dst = peer_rank(peer, "send to");
    std::lock_guard lock(mu_);
    pp_.send(dst, kPipelineTag, data, bytes, step("pipeline send"));
  }

  void recv(PipelinePeer peer, void* data, std::size_t bytes) override {
    const int src = peer_rank(peer, "receive from");
    pp_.recv(src, kPipelineTag, data, bytes, step("pipeline receive"));
  }

 private:
  static constexpr int kPipelineTag = 17;

  mpi::Step step(const std::string& what) const { return {"model execution: " + what, timeout_s_}; }
  mpi::Step step(GroupRole g, const char* what) const { return step(std::string(group_role_name(g)) + " " + what); }

  const mpi::Comm& comm(GroupRole g) const {
    switch (g) {
      case GroupRole::world: return world_;
      case GroupRole::tp: return tp_;
      case GroupRole::pp: return pp_;
      case GroupRole::dp: return dp_;
    }
    throw CommError("invalid group role");
  }

  int peer_rank(PipelinePeer peer, const char* what) const {
    int p = layout_.pp_rank(rank_);
    int q = peer == PipelinePeer::next ? p + 1 : p - 1;
    if (q < 0 || q >= layout_.pp)
      throw CommError("pipeline stage " + std::to_string(p) + " of " + std::to_string(layout_.pp) + " has no " +
                      (peer == PipelinePeer::next ? "next" : "previous") + " stage to " + what);
    return q;
  }

  mpi::Comm world_;
  double timeout_s_;
  ParallelLayout layout_;
  int rank_ = 0;
  mpi::Comm tp_, pp_, dp_;
  // Serialises sends and collectives of this rank's threads (the stream
  // workers); a receive does not hold it, so a rank can wait for its
  // previous stage while another of its streams sends.
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(int tp, int pp, double timeout_s) {
  if (!MpiSession::initialized())
    throw CommError("MPI is not initialised: create an MpiSession first (and run under mpirun)");
  if (!(timeout_s > 0))
    throw ConfigError("the MPI communicator's timeout must be a positive number of seconds (or infinity), got " +
                      std::to_string(timeout_s));
  auto comm = std::make_unique<MpiCommunicator>(tp, pp, timeout_s);
  set_current_communicator(comm.get());
  return comm;
}

}  // namespace npucache
