// How the coordinator reaches the other ranks: the collectives and
// point-to-point transfers its protocol uses, each bounded by an
// mpi::Step (mpi/comm.h says what a bounded operation does at its
// deadline), behind an interface the coordinator owns.
//
// MpiTransport runs them over an mpi::Comm. The coordinator takes its
// transport from the process context (transport()): the MPI one over its
// communicator (context.h), or one a test installed (install_transport),
// which wraps the MPI one to make a rank slow at a step, never arrive,
// receive damaged bytes or fail in a phase of its own work (local_work).
// Product code installs none.
//
// Thread safety: a transport is used by one coordinated call at a time,
// as the communicator under it; transport() and install_transport() may
// be called from any thread.
#pragma once

#include "coord/phase.h"
#include "mpi/comm.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace npucache::coord {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Element-wise maximum over the ranks, in place.
  virtual void allreduce_max(std::vector<std::uint64_t>& values, const mpi::Step& step) const = 0;
  // Every rank's bytes, in rank order.
  virtual std::vector<std::string> allgather(const std::string& mine, const mpi::Step& step) const = 0;
  // mpi::Comm's send_to, recv_from and sendrecv (tags `tag` and tag + 1).
  virtual void send_to(const std::vector<int>& dsts, int tag, const std::string& data, const mpi::Step& step) const = 0;
  virtual std::vector<std::string> recv_from(const std::vector<int>& srcs, int tag, const mpi::Step& step) const = 0;
  virtual std::string sendrecv(const std::string& data, int dst, int src, int tag, const mpi::Step& step) const = 0;
  // This rank's own work in `phase` of `method` begins: the part whose
  // failure the ranks agree on (agreement.h). No communication; the MPI
  // transport does nothing, a test's throws to make this rank fail alone.
  virtual void local_work(Phase phase, const std::string& method) const;
};

// Over a communicator, which must outlive it.
class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(const mpi::Comm& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void allreduce_max(std::vector<std::uint64_t>& values, const mpi::Step& step) const override;
  std::vector<std::string> allgather(const std::string& mine, const mpi::Step& step) const override;
  void send_to(const std::vector<int>& dsts, int tag, const std::string& data, const mpi::Step& step) const override;
  std::vector<std::string> recv_from(const std::vector<int>& srcs, int tag, const mpi::Step& step) const override;
  std::string sendrecv(const std::string& data, int dst, int src, int tag, const mpi::Step& step) const override;

 private:
  const mpi::Comm& comm_;
};

// The coordinator's transport in this process: the installed one, else
// MPI over the coordinator's communicator. Makes the coordinator's context
// on first use (collective, within `timeout_s`; the time it took is added
// to *setup_s).
std::shared_ptr<const Transport> transport(double timeout_s, double* setup_s);
// The MPI transport over the coordinator's communicator (made as above),
// for a test's transport to wrap.
std::shared_ptr<const Transport> mpi_transport(double timeout_s);
// Makes `t` the process's coordinator transport (null: MPI again). For
// tests; the process context's service, so a test's Context::Scope ends it.
void install_transport(std::shared_ptr<const Transport> t);

}  // namespace npucache::coord
