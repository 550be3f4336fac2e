#include "coord/plan.h"

#include "format/names.h"

#include <npucache/error.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace npucache::coord {

std::string RankInfo::encode() const {
  std::string f = failure;  // a field of its own: tabs inside it become spaces
  std::replace(f.begin(), f.end(), '\t', ' ');
  std::string rs;
  for (std::size_t k = 0; k < regions.size() && k < kMaxRankRegions; ++k) rs += (k ? "," : "") + regions[k];
  return graph_key + "\t" + std::to_string(cost) + "\t" + (needs ? "1" : "0") + "\t" + (holds ? "1" : "0") + "\t" +
         (remote ? "1" : "0") + "\t" + f + "\t" + rs + "\t" + store;
}

RankInfo RankInfo::decode(const std::string& s) {
  RankInfo r;
  std::istringstream in(s);
  std::string cost, needs, holds, remote, regions;
  if (!std::getline(in, r.graph_key, '\t') || !std::getline(in, cost, '\t') || !std::getline(in, needs, '\t') ||
      !std::getline(in, holds, '\t') || !std::getline(in, remote, '\t') || !std::getline(in, r.failure, '\t') ||
      !std::getline(in, regions, '\t'))
    throw CommError("malformed rank report '" + s.substr(0, 200) + "'");
  std::istringstream rs(regions);
  for (std::string k; std::getline(rs, k, ',');) {
    if (k.empty()) continue;
    if (r.regions.size() == kMaxRankRegions)
      throw CommError("a rank report names more than " + std::to_string(kMaxRankRegions) +
                      " regions; a rank of this job runs another npucache");
    if (!format::names::valid_graph_key(k))
      throw CommError("a rank report names '" + k.substr(0, 40) +
                      "' as a region, which is no region key; a rank of this job runs another npucache");
    if (std::find(r.regions.begin(), r.regions.end(), k) != r.regions.end())
      throw CommError("a rank report names region " + k +
                      " twice; a rank of this job runs another npucache (each rank names a region once)");
    r.regions.push_back(k);
  }
  std::getline(in, r.store);  // the last field, empty for a rank without a store
  r.cost = std::stod(cost);
  r.needs = needs == "1";
  r.holds = holds == "1";
  r.remote = remote == "1";
  return r;
}

Plan make_plan(const std::vector<RankInfo>& ranks) {
  const std::size_t n = ranks.size();
  Plan p;
  p.group_of.assign(n, -1);
  p.load.assign(n, 0.0);
  p.ships_object.assign(n, false);
  std::map<std::string, std::vector<int>> members;
  for (std::size_t r = 0; r < n; ++r) members[ranks[r].graph_key].push_back(static_cast<int>(r));
  struct G {
    std::string key;
    std::vector<int> ranks;
    double cost;
  };
  std::vector<G> groups;
  for (auto& [k, rs] : members) {
    bool needed = false;
    double cost = 0;
    for (int r : rs) {
      needed = needed || ranks[static_cast<std::size_t>(r)].needs;
      cost = std::max(cost, ranks[static_cast<std::size_t>(r)].cost);
    }
    if (needed) groups.push_back({k, rs, cost});
  }
  // Expensive compiles first, each to the least-loaded member (ties: lower rank).
  std::stable_sort(groups.begin(), groups.end(), [](const G& a, const G& b) { return a.cost > b.cost; });
  for (const G& g : groups) {
    const int gi = static_cast<int>(p.keys.size());
    p.keys.push_back(g.key);
    int owner = -1;
    for (int r : g.ranks)
      if (ranks[static_cast<std::size_t>(r)].holds) {
        owner = r;
        break;
      }
    if (owner < 0) {
      for (int r : g.ranks)
        if (owner < 0 || p.load[static_cast<std::size_t>(r)] < p.load[static_cast<std::size_t>(owner)]) owner = r;
      p.load[static_cast<std::size_t>(owner)] += g.cost;
    }
    p.owner.push_back(owner);
    for (int r : g.ranks) p.group_of[static_cast<std::size_t>(r)] = gi;
  }
  // Stores: the first rank naming a store writes it; of the ranks sharing a
  // store and a key, the lowest needer ships the object unless the store
  // already holds it.
  std::map<std::string, int> store_index;
  std::set<std::pair<std::string, std::string>> shipped;  // (store, key)
  std::set<std::pair<std::string, std::string>> held;
  for (std::size_t r = 0; r < n; ++r)
    if (ranks[r].holds && !ranks[r].store.empty()) held.insert({ranks[r].store, ranks[r].graph_key});
  p.store_group.assign(n, -1);
  for (std::size_t r = 0; r < n; ++r) {
    if (ranks[r].store.empty()) continue;  // no usable cache: no store, no writer
    auto [it, inserted] = store_index.try_emplace(ranks[r].store, static_cast<int>(store_index.size()));
    p.store_group[r] = it->second;
    if (inserted) p.store_writer.push_back(static_cast<int>(r));
    const auto sk = std::make_pair(ranks[r].store, ranks[r].graph_key);
    if (ranks[r].needs && !held.count(sk) && shipped.insert(sk).second) p.ships_object[r] = true;
  }
  return p;
}

}  // namespace npucache::coord
