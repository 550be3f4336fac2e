// The coordinator's plan: pure functions of what every rank reported, so
// every rank computes the same plan without another exchange.
#pragma once

#include <string>
#include <vector>

namespace npucache::coord {

// The most region keys a rank report carries; decode() refuses a report
// with more, or with anything but region keys among them.
constexpr std::size_t kMaxRankRegions = 1024;

struct RankInfo {
  std::string graph_key;
  double cost = 0;      // estimated compile cost (graph size)
  bool needs = false;   // missed: needs the artifact and a new entry
  bool holds = false;   // its store has the artifact
  std::string store;    // store identity (marker id, device, inode: Store::identity); "" when its
                        // cache is refused or unusable: it is no store's member nor writer
  bool remote = false;  // its cache has a remote tier
  std::string failure;  // LocalFailure::encode() of its own work ("" when none failed)
  // The region keys its trace calls that its store lacks (a compile of its
  // program would compile them): region_plan.h. encode() sends the first
  // kMaxRankRegions of them: the waves are a saving, and a region left out
  // is compiled by each store's compile that calls it.
  std::vector<std::string> regions;

  std::string encode() const;
  static RankInfo decode(const std::string& s);
};

struct Plan {
  std::vector<std::string> keys;   // one per group, with some needer
  std::vector<int> owner;          // per group
  std::vector<int> group_of;       // per rank: its group, -1 when nothing to do
  std::vector<int> store_group;    // per rank: index of its store, -1 when it has none
  std::vector<int> store_writer;   // per store: its writer, the lowest rank using it
  std::vector<bool> ships_object;  // per rank: sends the object to its store's writer
  std::vector<double> load;        // per rank: estimated compile cost assigned
};

// Groups ranks by graph key; one owner per group: a member whose store
// holds the artifact if any, otherwise the member with the least compile
// cost assigned so far (groups taken by decreasing cost), so compiles
// spread over ranks instead of landing on rank 0. Ranks reporting the same
// store identity share one store and its one writer, on one host or many;
// a rank reporting none (its cache refused or unusable) writes nothing.
Plan make_plan(const std::vector<RankInfo>& ranks);

}  // namespace npucache::coord
