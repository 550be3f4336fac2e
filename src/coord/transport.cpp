#include "coord/transport.h"

#include "coord/context.h"
#include "process/context.h"

#include <mutex>

namespace npucache::coord {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::arrival: return "arrival";
    case Phase::plan: return "plan";
    case Phase::compile: return "compile";
    case Phase::exchange: return "exchange";
    case Phase::load: return "load";
    case Phase::persist: return "persist";
  }
  return "?";
}

const char* phase_work(Phase p) {
  switch (p) {
    case Phase::arrival: return "tracing its call and checking its cache";
    case Phase::plan: return "tracing its call and reporting its key and store";
    case Phase::compile: return "compiling or reading the program it owns";
    case Phase::exchange: return "passing the program on";
    case Phase::load: return "loading the program it received";
    case Phase::persist: return "saving the entries";
  }
  return "?";
}

void Transport::local_work(Phase, const std::string&) const {}

void MpiTransport::allreduce_max(std::vector<std::uint64_t>& values, const mpi::Step& step) const {
  comm_.allreduce_max(values, step);
}

std::vector<std::string> MpiTransport::allgather(const std::string& mine, const mpi::Step& step) const {
  return comm_.allgather(mine, step);
}

void MpiTransport::send_to(const std::vector<int>& dsts, int tag, const std::string& data,
                           const mpi::Step& step) const {
  comm_.send_to(dsts, tag, data, step);
}

std::vector<std::string> MpiTransport::recv_from(const std::vector<int>& srcs, int tag, const mpi::Step& step) const {
  return comm_.recv_from(srcs, tag, step);
}

std::string MpiTransport::sendrecv(const std::string& data, int dst, int src, int tag, const mpi::Step& step) const {
  return comm_.sendrecv(data, dst, src, tag, step);
}

namespace {

// The process's coordinator transport: a service of the process context.
struct Slot {
  std::mutex mu;
  std::shared_ptr<const Transport> mpi;        // over Context's communicator, made on first use
  std::shared_ptr<const Transport> installed;  // a test's
};

}  // namespace

std::shared_ptr<const Transport> mpi_transport(double timeout_s) {
  const Context& ctx = Context::get(timeout_s, nullptr);
  Slot& slot = process::Context::current().get<Slot>();
  std::lock_guard lock(slot.mu);
  if (!slot.mpi) slot.mpi = std::make_shared<MpiTransport>(ctx.comm());
  return slot.mpi;
}

std::shared_ptr<const Transport> transport(double timeout_s, double* setup_s) {
  (void)Context::get(timeout_s, setup_s);
  {
    Slot& slot = process::Context::current().get<Slot>();
    std::lock_guard lock(slot.mu);
    if (slot.installed) return slot.installed;
  }
  return mpi_transport(timeout_s);
}

void install_transport(std::shared_ptr<const Transport> t) {
  Slot& slot = process::Context::current().get<Slot>();
  std::lock_guard lock(slot.mu);
  slot.installed = std::move(t);
}

}  // namespace npucache::coord
