// The MPI communicator and MpiSession: the only runtime file that includes
// <mpi.h>. Every MPI call is checked; MPI errors become CommError.
#include <npucache/error.h>
#include <npucache/mpi.h>

#include <mpi.h>

#include "runtime/mpi_check.h"

#include <climits>
#include <exception>
#include <utility>
#include <mutex>

namespace npucache {
namespace {

using mpi::check;

// MPI counts are int: large transfers go in chunks of this many bytes.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

// Owns an MPI communicator handle.
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(MPI_Comm c) : comm_(c) {}
  ~CommHandle() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  }
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  CommHandle(CommHandle&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  CommHandle& operator=(CommHandle&& o) noexcept {
    std::swap(comm_, o.comm_);
    return *this;
  }
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int tp, int pp) {
    int world = 0;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size");
    layout_ = ParallelLayout{world, tp, pp};
    layout_.validate();
    const int t = layout_.tp_rank(rank_), p = layout_.pp_rank(rank_), d = layout_.dp_rank(rank_);
    // color = the coordinates the group shares; key = position within it.
    tp_ = split(p + pp * d, t);
    pp_ = split(t + tp * d, p);
    dp_ = split(t + tp * p, d);
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
    for (std::size_t at = 0; at < count; at += kMaxChunk / sizeof(float)) {
      int n = static_cast<int>(std::min(count - at, kMaxChunk / sizeof(float)));
      check(MPI_Allreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, MPI_SUM, comm(g)), "MPI_Allreduce");
    }
  }

  void all_gather(GroupRole g, const void* in, void* out, std::size_t bytes) override {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      throw CommError("all_gather of " + std::to_string(bytes) + " bytes per rank exceeds MPI's int count");
    std::lock_guard lock(mu_);
    check(MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE,
                        comm(g)),
          "MPI_Allgather");
  }

  void broadcast(GroupRole g, int root, void* data, std::size_t bytes) override {
    if (root < 0 || root >= size(g))
      throw CommError("broadcast root " + std::to_string(root) + " is not in the " +
                      std::string(group_role_name(g)) + " group of " + std::to_string(size(g)));
    std::lock_guard lock(mu_);
    auto* p = static_cast<char*>(data);
    for (std::size_t at = 0; at < bytes; at += kMaxChunk) {
      int n = static_cast<int>(std::min(bytes - at, kMaxChunk));
      check(MPI_Bcast(p + at, n, MPI_BYTE, root, comm(g)), "MPI_Bcast");
    }
  }

  void barrier(GroupRole g) override {
    std::lock_guard lock(mu_);
    check(MPI_Barrier(comm(g)), "MPI_Barrier");
  }

  void send(PipelinePeer peer, const void* data, std::size_t bytes) override {
    int dst = peer_rank(peer, "send to");
    std::lock_guard lock(mu_);
    auto* p = static_cast<const char*>(data);
    for (std::size_t at = 0; at < bytes; at += kMaxChunk) {
      int n = static_cast<int>(std::min(bytes - at, kMaxChunk));
      check(MPI_Send(p + at, n, MPI_BYTE, dst, kPipelineTag, pp_.get()), "MPI_Send");
    }
  }

  void recv(PipelinePeer peer, void* data, std::size_t bytes) override {
    int src = peer_rank(peer, "receive from");
    auto* p = static_cast<char*>(data);
    for (std::size_t at = 0; at < bytes; at += kMaxChunk) {
      int n = static_cast<int>(std::min(bytes - at, kMaxChunk));
      MPI_Status st;
      {
        std::lock_guard lock(mu_);
        check(MPI_Recv(p + at, n, MPI_BYTE, src, kPipelineTag, pp_.get(), &st), "MPI_Recv");
      }
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (got != n)
        throw CommError("pipeline recv expected " + std::to_string(n) + " bytes, got " +
                        std::to_string(got) + ": the stages disagree on the activation shape");
    }
  }

 private:
  static constexpr int kPipelineTag = 17;

  CommHandle split(int color, int key) {
    MPI_Comm c = MPI_COMM_NULL;
    check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c), "MPI_Comm_split");
    return CommHandle(c);
  }

  MPI_Comm comm(GroupRole g) const {
    switch (g) {
      case GroupRole::world: return MPI_COMM_WORLD;
      case GroupRole::tp: return tp_.get();
      case GroupRole::pp: return pp_.get();
      case GroupRole::dp: return dp_.get();
    }
    throw CommError("invalid group role");
  }

  int peer_rank(PipelinePeer peer, const char* what) const {
    int p = layout_.pp_rank(rank_);
    int q = peer == PipelinePeer::next ? p + 1 : p - 1;
    if (q < 0 || q >= layout_.pp)
      throw CommError("pipeline stage " + std::to_string(p) + " of " + std::to_string(layout_.pp) +
                      " has no " + (peer == PipelinePeer::next ? "next" : "previous") +
                      " stage to " + what);
    return q;
  }

  ParallelLayout layout_;
  int rank_ = 0;
  CommHandle tp_, pp_, dp_;
  // Serialises calls when MPI gives less than MPI_THREAD_MULTIPLE; a
  // receive releases it while it waits only between chunks.
  std::mutex mu_;
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  owns_ = true;
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

void MpiSession::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

std::unique_ptr<Communicator> make_mpi_communicator(int tp, int pp) {
  if (!MpiSession::initialized())
    throw CommError("MPI is not initialised: create an MpiSession first (and run under mpirun)");
  return std::make_unique<MpiCommunicator>(tp, pp);
}

}  // namespace npucache
