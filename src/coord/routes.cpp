#include "coord/routes.h"

#include <algorithm>
#include <set>

namespace npucache::coord {

void binomial_tree(const std::vector<int>& ranks, std::map<int, Route>& routes) {
  // MPI_Bcast's binomial tree: position i > 0 receives from i - lowbit(i)
  // and sends to i + m for each power of two m below lowbit(i) (every m for
  // the root), the largest (farthest, largest subtree) first. A subtree is
  // a contiguous range of positions.
  const std::size_t n = ranks.size();
  for (std::size_t i = 0; i < n; ++i) {
    Route& r = routes[ranks[i]];
    const std::size_t low = i == 0 ? n : (i & (~i + 1));
    if (i > 0) r.parent = ranks[i - low];
    std::vector<int> kids;
    for (std::size_t m = 1; m < low && i + m < n; m *= 2) kids.push_back(ranks[i + m]);
    std::reverse(kids.begin(), kids.end());
    r.children.insert(r.children.end(), kids.begin(), kids.end());
  }
}

std::map<int, Route> flat_routes(int owner, const std::vector<int>& receivers) {
  std::vector<int> ranks{owner};
  std::set<int> sorted(receivers.begin(), receivers.end());
  sorted.erase(owner);
  ranks.insert(ranks.end(), sorted.begin(), sorted.end());
  std::map<int, Route> routes;
  binomial_tree(ranks, routes);
  return routes;
}

std::map<int, Route> node_leader_routes(int owner, const std::vector<int>& receivers, const std::vector<int>& host_of) {
  const int owner_host = host_of[static_cast<std::size_t>(owner)];
  std::map<int, std::vector<int>> by_host;  // host -> its receivers, in rank order
  std::set<int> sorted(receivers.begin(), receivers.end());
  sorted.erase(owner);
  for (int r : sorted) by_host[host_of[static_cast<std::size_t>(r)]].push_back(r);
  // Between hosts: the owner, then each other host's lowest receiver.
  std::vector<int> across{owner};
  for (const auto& [h, rs] : by_host)
    if (h != owner_host) across.push_back(rs.front());
  std::map<int, Route> routes;
  binomial_tree(across, routes);
  // Within each host: from the rank that holds it there to the others.
  for (const auto& [h, rs] : by_host) {
    std::vector<int> local{h == owner_host ? owner : rs.front()};
    for (int r : rs)
      if (r != local.front()) local.push_back(r);
    binomial_tree(local, routes);
  }
  return routes;
}

}  // namespace npucache::coord
