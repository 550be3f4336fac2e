// The region waves of a coordinated compile: pure functions of what every
// rank reported, so every rank computes the same waves without another
// exchange (docs/ARCHITECTURE.md, "Regions across the stores of a job").
//
// Ranks of one store meet over a region through the store's claim
// (cache/region_library.h): one of them compiles it, the others take it.
// Ranks of different stores (node-local directories) cannot; without
// waves each store's owners compile every region they call. So when
// compiling owners of two or more stores need the same region that their
// stores lack, the lowest such owner compiles it in the first wave, and
// after the first wave's agreement sends its region file to every needing
// owner of the other stores (the first of a store to store it publishes
// it; a region file is kilobytes); those owners compile in the second
// wave, taking it from their store. A layer shared by every stage of a job
// then compiles once per job, whatever the number of stores.
//
// What bounds it: the waits are the agreements the phases already have; a
// region file is sent after the first wave's agreement, when every rank is
// there, and one that does not come, or does not check, is compiled by
// the second wave's compile itself. An owner that compiles a region for
// others is never in the second wave (it compiles what it needs itself),
// so no owner waits for one that waits.
#pragma once

#include "coord/plan.h"

#include <string>
#include <vector>

namespace npucache::coord {

struct RegionPlan {
  // Per rank: true when it compiles in the second wave (after receiving).
  std::vector<bool> second_wave;
  struct Transfer {
    std::string region;   // its region key (regions/<key>.h5)
    int from = -1;        // the owner compiling it in the first wave
    std::vector<int> to;  // the owners of other stores needing it, in rank order: each stores it
  };
  std::vector<Transfer> transfers;  // in region key order
  bool empty() const { return transfers.empty(); }
};

// `compiling`: per rank, whether it compiles this call's program (an owner
// whose group is not served by its store or the remote). Ranks without a
// store (store_group -1) take no part.
RegionPlan make_region_plan(const std::vector<RankInfo>& ranks, const Plan& plan, const std::vector<bool>& compiling);

}  // namespace npucache::coord
