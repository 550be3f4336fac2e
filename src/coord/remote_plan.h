// The remote tier as a source of the coordinator's plan (pure functions of
// what every rank reported, like plan.h): when every rank has the remote
// tier, each key group that no store holds is first read from the remote,
// once per host, by the host's lowest rank needing it (its fetcher), and
// passed on within the host along the exchange's routes. Only when no
// fetcher of a group could read it does its owner compile; when some
// could, the lowest of them becomes the group's owner.
#pragma once

#include "coord/plan.h"
#include "coord/routes.h"

#include <map>
#include <vector>

namespace npucache::coord {

struct RemoteFetch {
  std::vector<int> groups;                   // plan groups no store holds, in plan order
  std::map<int, std::vector<int>> fetchers;  // group -> one fetcher per host with needers, ascending
};
// Empty unless every rank reported a remote tier.
RemoteFetch plan_remote(const Plan& plan, const std::vector<RankInfo>& ranks, const std::vector<int>& host_of);

// Routes from each host's fetcher to the host's other receivers (the
// artifact never crosses hosts: each host read it from the remote).
std::map<int, Route> host_routes(const std::vector<int>& fetchers, const std::vector<int>& receivers,
                                 const std::vector<int>& host_of);

}  // namespace npucache::coord
