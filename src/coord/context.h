// The coordinator's share of MPI, made once per process (a service of the
// process context), collectively: its own communicator (a duplicate of
// MPI_COMM_WORLD, so its collectives never meet the model's, run by stream
// workers, or the program's own), made by the first coordinated method, and
// the map of hosts (the ranks that share memory, MPI_COMM_TYPE_SHARED,
// gathered host by host so that no rank talks to every other), made only
// when a method first has something to plan: a warm start where every rank
// hits pays one collective of set-up, not five. Every step of the set-up is
// bounded by the calling method's timeout.
#pragma once

#include "mpi/comm.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace npucache::coord {

struct Hosts {
  std::vector<int> host_of;        // per rank: its host, hosts numbered by their lowest rank
  std::vector<std::string> names;  // per host: its name
  int count() const { return static_cast<int>(names.size()); }
};

class Context {
 public:
  // The process's context, made on first use within `timeout_s` (the time
  // it took is added to *setup_s).
  static const Context& get(double timeout_s, double* setup_s);

  const mpi::Comm& comm() const { return comm_; }
  // The map of hosts, made on first use within `timeout_s` (the time it
  // took is added to *setup_s). The first call is collective: every rank
  // makes it at the same point of the protocol (the coordinator: after an
  // arrival that agreed some rank misses).
  const Hosts& hosts(double timeout_s, double* setup_s) const;
  // The map if a method made it already, else nullptr (never collective).
  const Hosts* hosts_if_made() const;

 private:
  Context() = default;
  mpi::Comm comm_;
  mutable std::mutex hosts_mu_;
  mutable std::unique_ptr<Hosts> hosts_;
};

struct TableEntry;
// Hosts from each host's (name, ranks), numbered by their lowest rank;
// CommError unless every rank of 0..world-1 is on exactly one host (pure).
Hosts hosts_from(std::vector<TableEntry> hosts, int world);

}  // namespace npucache::coord
