#include "coord/remote_plan.h"

#include <algorithm>
#include <set>

namespace npucache::coord {

RemoteFetch plan_remote(const Plan& plan, const std::vector<RankInfo>& ranks, const std::vector<int>& host_of) {
  RemoteFetch f;
  if (ranks.empty() || !std::all_of(ranks.begin(), ranks.end(), [](const RankInfo& r) { return r.remote; })) return f;
  for (std::size_t g = 0; g < plan.keys.size(); ++g) {
    const int owner = plan.owner[g];
    if (ranks[static_cast<std::size_t>(owner)].holds) continue;  // a store holds it: local first
    std::map<int, int> lowest;                                   // host -> its lowest needer
    for (std::size_t r = 0; r < ranks.size(); ++r)
      if (plan.group_of[r] == static_cast<int>(g) && ranks[r].needs)
        lowest.try_emplace(host_of[r], static_cast<int>(r));
    std::vector<int> fetchers;
    for (const auto& [h, r] : lowest) fetchers.push_back(r);
    std::sort(fetchers.begin(), fetchers.end());
    f.groups.push_back(static_cast<int>(g));
    f.fetchers[static_cast<int>(g)] = std::move(fetchers);
  }
  return f;
}

std::map<int, Route> host_routes(const std::vector<int>& fetchers, const std::vector<int>& receivers,
                                 const std::vector<int>& host_of) {
  std::map<int, Route> routes;
  for (int f : fetchers) {
    std::vector<int> local{f};
    for (int r : std::set<int>(receivers.begin(), receivers.end()))
      if (r != f && host_of[static_cast<std::size_t>(r)] == host_of[static_cast<std::size_t>(f)]) local.push_back(r);
    binomial_tree(local, routes);
  }
  return routes;
}

}  // namespace npucache::coord
