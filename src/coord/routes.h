// How an artifact travels from its owner to the ranks that need it: pure
// functions of the plan, so every rank computes the same routes.
//
// Node-leader routes (the default): the artifact crosses the network once
// per host. Of each host with receivers, one rank (the owner on the
// owner's host, else the host's lowest receiver) gets it from another host,
// in a binomial tree over those hosts' receiving ranks rooted at the owner;
// each of them then passes it on within its host, in a binomial tree over
// the host's receivers (shared memory). Depth: ceil(log2 H) hops between
// hosts + ceil(log2 R) within one, for H hosts of at most R receivers.
//
// Flat routes (the baseline of benchmarks): one binomial tree over the
// owner and the receivers in rank order, as MPI_Bcast's binomial algorithm,
// ignoring hosts: how often the bytes cross the network then depends on
// where the ranks were placed.
#pragma once

#include <map>
#include <vector>

namespace npucache::coord {

struct Route {
  int parent = -1;            // the rank this one receives from (-1: the owner)
  std::vector<int> children;  // the ranks this one sends to, largest subtree first
};

// `receivers` excludes the owner; `host_of[r]` is rank r's host index.
std::map<int, Route> node_leader_routes(int owner, const std::vector<int>& receivers, const std::vector<int>& host_of);
std::map<int, Route> flat_routes(int owner, const std::vector<int>& receivers);

// Binomial tree over `ranks` (ranks[0] the root): each rank's route.
void binomial_tree(const std::vector<int>& ranks, std::map<int, Route>& routes);

}  // namespace npucache::coord
