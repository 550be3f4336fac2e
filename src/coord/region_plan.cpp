#include "coord/region_plan.h"

#include <map>
#include <set>

namespace npucache::coord {

RegionPlan make_region_plan(const std::vector<RankInfo>& ranks, const Plan& plan, const std::vector<bool>& compiling) {
  const std::size_t n = ranks.size();
  RegionPlan p;
  p.second_wave.assign(n, false);
  // Region key -> store -> its compiling owners needing it, in rank order.
  std::map<std::string, std::map<int, std::vector<int>>> needers;
  for (std::size_t r = 0; r < n && r < compiling.size() && r < plan.store_group.size(); ++r) {
    if (!compiling[r] || plan.store_group[r] < 0) continue;
    // Once each, whatever a report repeats (RankInfo::decode refuses a
    // report that does): a rank listed twice would be sent a region twice,
    // and receive it once.
    for (const auto& region : ranks[r].regions) {
      std::vector<int>& rs = needers[region][plan.store_group[r]];
      if (rs.empty() || rs.back() != static_cast<int>(r)) rs.push_back(static_cast<int>(r));
    }
  }
  // The first wave's compiler of each region needed in two stores or more:
  // its lowest needing owner.
  std::map<std::string, int> compiler;
  std::set<int> compilers;
  for (const auto& [region, stores] : needers) {
    if (stores.size() < 2) continue;
    int lowest = -1;
    for (const auto& [store, rs] : stores)
      if (lowest < 0 || rs.front() < lowest) lowest = rs.front();
    compiler[region] = lowest;
    compilers.insert(lowest);
  }
  // An owner that needs a region of another store's compiler waits for it,
  // unless it compiles a region for others itself (never both waves). Each
  // one waiting receives it: the first to store it publishes the file, and
  // none starts its compile before it has the region (an owner not sent it
  // would find regions/ without it and compile it again).
  for (const auto& [region, from] : compiler) {
    RegionPlan::Transfer t{region, from, {}};
    const int home = plan.store_group[static_cast<std::size_t>(from)];
    for (const auto& [store, rs] : needers.at(region)) {
      if (store == home) continue;
      for (int r : rs)
        if (!compilers.count(r)) {
          p.second_wave[static_cast<std::size_t>(r)] = true;
          t.to.push_back(r);
        }
    }
    if (!t.to.empty()) p.transfers.push_back(std::move(t));
  }
  return p;
}

}  // namespace npucache::coord
