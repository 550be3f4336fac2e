// Group names, layout validation and the single-process communicator.
#include <npucache/error.h>
#include <npucache/runtime/communicator.h>

#include <cstring>

#include "process/context.h"
#include "runtime/process.h"

namespace npucache {

std::string_view group_role_name(GroupRole g) {
  switch (g) {
    case GroupRole::world: return "world";
    case GroupRole::tp: return "tp";
    case GroupRole::pp: return "pp";
    case GroupRole::dp: return "dp";
  }
  return "invalid";
}

GroupRole group_role_from_name(std::string_view name) {
  for (GroupRole g : {GroupRole::world, GroupRole::tp, GroupRole::pp, GroupRole::dp})
    if (group_role_name(g) == name) return g;
  throw CommError("unknown group role '" + std::string(name) +
                  "'; the communicator has the groups world, tp, pp and dp");
}

void ParallelLayout::validate() const {
  if (tp < 1 || pp < 1 || world_size < 1)
    throw ConfigError("tp (" + std::to_string(tp) + "), pp (" + std::to_string(pp) + ") and world size (" +
                      std::to_string(world_size) + ") must be >= 1");
  if (world_size % (tp * pp) != 0)
    throw ConfigError("tp*pp = " + std::to_string(tp) + "*" + std::to_string(pp) + " = " + std::to_string(tp * pp) +
                      " does not divide the world size " + std::to_string(world_size) +
                      "; launch a multiple of tp*pp ranks");
}

namespace {

class SingleProcessCommunicator final : public Communicator {
 public:
  const ParallelLayout& layout() const override { return layout_; }
  int global_rank() const override { return 0; }
  int rank(GroupRole) const override { return 0; }
  int size(GroupRole) const override { return 1; }
  void all_reduce_sum(GroupRole, float*, std::size_t) override {}
  void all_gather(GroupRole, const void* in, void* out, std::size_t bytes) override {
    if (in != out) std::memmove(out, in, bytes);
  }
  void broadcast(GroupRole, int root, void*, std::size_t) override {
    if (root != 0) throw CommError("broadcast root " + std::to_string(root) + " is not in a 1-rank group");
  }
  void barrier(GroupRole) override {}
  void send(PipelinePeer, const void*, std::size_t) override { no_peer(); }
  void recv(PipelinePeer, void*, std::size_t) override { no_peer(); }

 private:
  [[noreturn]] static void no_peer() {
    throw CommError(
        "a single-process job has no other pipeline stage to send to or receive "
        "from; run pipeline-parallel models under mpirun with pp > 1");
  }
  ParallelLayout layout_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

namespace {
thread_local Communicator* t_comm = nullptr;

// The communicator of threads that never set one. Never destroyed: a
// thread may still call while another runs exit().
SingleProcessCommunicator& unset_communicator() {
  static auto& single = *new SingleProcessCommunicator();
  return single;
}
}  // namespace

Communicator& current_communicator() { return t_comm ? *t_comm : unset_communicator(); }

void runtime::check_communicator_set(const Communicator* comm, std::string_view what) {
  if (comm != &unset_communicator()) return;
  const int world = process::world().size;
  if (world <= 1) return;
  throw CommError(std::string(what) + ": this process is one of " + std::to_string(world) +
                  " MPI ranks, but no communicator is set on the thread that ran it, so it would compute "
                  "this rank's partial result alone. Create the job's communicator with "
                  "make_mpi_communicator(tp, pp) on this thread (it becomes the thread's current "
                  "communicator), or call set_current_communicator(comm) on every thread that runs the model");
}

void set_current_communicator(Communicator* comm) { t_comm = comm; }

}  // namespace npucache
