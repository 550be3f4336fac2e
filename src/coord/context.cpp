#include "coord/context.h"

#include <npucache/error.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <unistd.h>

namespace npucache::coord {
namespace {

std::string host_name() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

Hosts hosts_from(const std::vector<std::string>& records) {
  Hosts h;
  std::vector<int> leader(records.size());
  std::map<int, std::string> names;  // leader -> name, ordered
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto tab = records[r].find('\t');
    if (tab == std::string::npos) throw CommError("malformed host record '" + records[r] + "'");
    leader[r] = std::stoi(records[r].substr(0, tab));
    names.emplace(leader[r], records[r].substr(tab + 1));
  }
  std::map<int, int> index;
  for (const auto& [l, name] : names) {
    index[l] = static_cast<int>(h.names.size());
    h.names.push_back(name);
  }
  for (int l : leader) h.host_of.push_back(index[l]);
  return h;
}

const Context& Context::get(double timeout_s, double* setup_s) {
  static std::mutex mu;
  static std::unique_ptr<Context> ctx;
  std::lock_guard lock(mu);
  if (ctx) return *ctx;
  const auto t0 = std::chrono::steady_clock::now();
  auto c = std::unique_ptr<Context>(new Context());
  const mpi::Comm world = mpi::Comm::world();
  c->comm_ = world.dup({"coordinator set-up: its communicator", timeout_s});
  std::string mine;
  {
    const mpi::Comm node = c->comm_.split_shared({"coordinator set-up: finding the hosts", timeout_s});
    mine = std::to_string(node.world_rank(0)) + "\t" + host_name();
  }
  c->hosts_ = hosts_from(c->comm_.allgather(mine, {"coordinator set-up: the map of hosts", timeout_s}));
  std::vector<std::string> per_rank;
  for (int h : c->hosts_.host_of) per_rank.push_back(c->hosts_.names[static_cast<std::size_t>(h)]);
  mpi::set_host_names(std::move(per_rank));
  ctx = std::move(c);
  if (setup_s) *setup_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *ctx;
}

}  // namespace npucache::coord
