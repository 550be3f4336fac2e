#include "coord/context.h"

#include <npucache/error.h>

#include "coord/host_allgather.h"
#include "coord/transport.h"
#include "process/context.h"
#include "process/env.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

namespace npucache::coord {

Hosts hosts_from(std::vector<TableEntry> hosts, int world) {
  for (auto& e : hosts) std::sort(e.ranks.begin(), e.ranks.end());
  std::sort(hosts.begin(), hosts.end(), [](const TableEntry& a, const TableEntry& b) {
    return a.ranks.empty() ? false : b.ranks.empty() ? true : a.ranks.front() < b.ranks.front();
  });
  Hosts h;
  h.host_of.assign(static_cast<std::size_t>(world), -1);
  for (const auto& e : hosts) {
    for (int r : e.ranks) {
      if (r < 0 || r >= world || h.host_of[static_cast<std::size_t>(r)] >= 0)
        throw CommError("coordinator set-up: rank " + std::to_string(r) + " is on two hosts or out of range");
      h.host_of[static_cast<std::size_t>(r)] = h.count();
    }
    h.names.push_back(e.record);
  }
  for (int r = 0; r < world; ++r)
    if (h.host_of[static_cast<std::size_t>(r)] < 0)
      throw CommError("coordinator set-up: no host lists rank " + std::to_string(r));
  return h;
}

namespace {

// The process's coordinator context: a service of the process context.
struct Held {
  std::mutex mu;
  std::unique_ptr<Context> ctx;
};

}  // namespace

const Context& Context::get(double timeout_s, double* setup_s) {
  Held& held = process::Context::current().get<Held>();
  std::lock_guard lock(held.mu);
  std::unique_ptr<Context>& ctx = held.ctx;
  if (ctx) return *ctx;
  const double t0 = process::Context::current().env().monotonic_s();
  auto c = std::unique_ptr<Context>(new Context());
  c->comm_ = mpi::Comm::world().dup({"coordinator set-up: its communicator", timeout_s});
  ctx = std::move(c);
  if (setup_s) *setup_s += process::Context::current().env().monotonic_s() - t0;
  return *ctx;
}

const Hosts* Context::hosts_if_made() const {
  std::lock_guard lock(hosts_mu_);
  return hosts_.get();
}

const Hosts& Context::hosts(double timeout_s, double* setup_s) const {
  std::lock_guard lock(hosts_mu_);
  if (hosts_) return *hosts_;
  const double t0 = process::Context::current().env().monotonic_s();
  // The map of hosts without a message between every pair of ranks: each
  // host's lowest rank describes its host (name, ranks), those ranks
  // exchange the descriptions in a Bruck all-gather, and each passes the
  // table down its host.
  const mpi::Comm node = comm_.split_shared({"coordinator set-up: finding the hosts", timeout_s});
  const mpi::Comm leaders =
      comm_.split(node.rank() == 0 ? 0 : -1, comm_.rank(), {"coordinator set-up: the hosts' leaders", timeout_s});
  std::string table;
  const mpi::Step step{"coordinator set-up: the map of hosts", timeout_s};
  if (leaders.valid()) {
    TableEntry mine{process::Context::current().identity().host, {}};
    for (int i = 0; i < node.size(); ++i) mine.ranks.push_back(node.world_rank(i));
    std::vector<int> peers;
    for (int i = 0; i < leaders.size(); ++i) peers.push_back(i);
    std::vector<TableEntry> all;
    for (const auto& b :
         bruck_allgather(MpiTransport(leaders), peers, leaders.rank(), encode_table({mine}), kHostAllgatherTag, step))
      for (auto& e : decode_table(b)) all.push_back(std::move(e));
    table = encode_table(all);
  }
  node.broadcast(table, 0, step);
  auto h = std::make_unique<Hosts>(hosts_from(decode_table(table), comm_.size()));
  std::vector<std::string> per_rank;
  for (int i : h->host_of) per_rank.push_back(h->names[static_cast<std::size_t>(i)]);
  mpi::set_host_names(std::move(per_rank));
  hosts_ = std::move(h);
  if (setup_s) *setup_s += process::Context::current().env().monotonic_s() - t0;
  return *hosts_;
}

}  // namespace npucache::coord
