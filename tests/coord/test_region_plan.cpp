// The region waves of a coordinated compile (coord/region_plan.h): a
// region that owners of several stores need is compiled once, by the
// lowest of them in the first wave, and sent to each owner of the other
// stores needing it, which compile in the second wave; an owner that compiles a
// region for others never waits for one.
#include <gtest/gtest.h>
#include <npucache/error.h>

#include "coord/plan.h"
#include "coord/region_plan.h"

#include <set>
#include <string>
#include <vector>

using namespace npucache::coord;

namespace {

// Rank r: its own key (its own stage program), the store named, the
// regions its store lacks.
RankInfo owner(int r, const std::string& store, std::vector<std::string> regions) {
  RankInfo i;
  i.graph_key = "k" + std::to_string(r);
  i.cost = 10;
  i.needs = true;
  i.store = store;
  i.regions = std::move(regions);
  return i;
}

RegionPlan waves(const std::vector<RankInfo>& ranks, std::vector<bool> compiling = {}) {
  if (compiling.empty()) compiling.assign(ranks.size(), true);
  return make_region_plan(ranks, make_plan(ranks), compiling);
}

// No rank both sends a region and waits for one, and every receiver waits.
void expect_no_cycle(const RegionPlan& p) {
  std::set<int> senders;
  for (const auto& t : p.transfers) {
    senders.insert(t.from);
    EXPECT_FALSE(p.second_wave[static_cast<std::size_t>(t.from)]) << "rank " << t.from << " sends and waits";
    for (int r : t.to) EXPECT_TRUE(p.second_wave[static_cast<std::size_t>(r)]) << "rank " << r;
  }
}

}  // namespace

TEST(RegionPlan, ARegionOfTwoStoresIsCompiledOnceAndSent) {
  // pp=2 on two hosts with node-local stores: each stage's owner on its host.
  const std::vector<RankInfo> ranks{owner(0, "a", {"r"}), owner(1, "b", {"r"})};
  const RegionPlan p = waves(ranks);
  ASSERT_EQ(p.transfers.size(), 1u);
  EXPECT_EQ(p.transfers[0].region, "r");
  EXPECT_EQ(p.transfers[0].from, 0);
  EXPECT_EQ(p.transfers[0].to, (std::vector<int>{1}));
  EXPECT_EQ(p.second_wave, (std::vector<bool>{false, true}));
  expect_no_cycle(p);
}

TEST(RegionPlan, OneStoreNeedsNoWave) {
  // Its ranks meet over the store's claim.
  EXPECT_TRUE(waves({owner(0, "a", {"r"}), owner(1, "a", {"r"}), owner(2, "a", {"r", "s"})}).empty());
  // A region only one store lacks (the other holds it, or calls another).
  EXPECT_TRUE(waves({owner(0, "a", {"r"}), owner(1, "b", {"s"})}).empty());
  EXPECT_TRUE(waves({owner(0, "a", {"r"}), owner(1, "b", {})}).empty());
}

// Every owner of another store that needs it receives it before its
// compile: one not sent it would find regions/ without it (its store's
// receiver may not have stored it yet) and compile it again.
TEST(RegionPlan, EveryWaitingOwnerOfAnotherStoreReceivesIt) {
  const std::vector<RankInfo> ranks{owner(0, "a", {"r"}), owner(1, "b", {"r"}), owner(2, "b", {"r"}),
                                    owner(3, "c", {"r"}), owner(4, "a", {"r"})};
  const RegionPlan p = waves(ranks);
  ASSERT_EQ(p.transfers.size(), 1u);
  EXPECT_EQ(p.transfers[0].from, 0);
  EXPECT_EQ(p.transfers[0].to, (std::vector<int>{1, 2, 3}));
  // Rank 4 shares rank 0's store: it takes the region through the claim.
  EXPECT_EQ(p.second_wave, (std::vector<bool>{false, true, true, true, false}));
  expect_no_cycle(p);
}

TEST(RegionPlan, AnOwnerCompilingARegionForOthersNeverWaits) {
  // Rank 1 compiles s for rank 2, so it compiles r itself rather than wait
  // for rank 0; rank 2 waits for s only.
  const std::vector<RankInfo> ranks{owner(0, "a", {"r"}), owner(1, "b", {"r", "s"}), owner(2, "c", {"s"})};
  const RegionPlan p = waves(ranks);
  ASSERT_EQ(p.transfers.size(), 1u);
  EXPECT_EQ(p.transfers[0].region, "s");
  EXPECT_EQ(p.transfers[0].from, 1);
  EXPECT_EQ(p.transfers[0].to, (std::vector<int>{2}));
  EXPECT_EQ(p.second_wave, (std::vector<bool>{false, false, true}));
  expect_no_cycle(p);
  // Many stores and regions, each owner needing a window of them: never a
  // rank that sends and waits.
  std::vector<RankInfo> many;
  for (int r = 0; r < 16; ++r)
    many.push_back(owner(r, "h" + std::to_string(r % 5), {"r" + std::to_string(r % 3), "r" + std::to_string(r % 7)}));
  expect_no_cycle(waves(many));
}

TEST(RegionPlan, RanksThatDoNotCompileOrHaveNoStoreTakeNoPart) {
  std::vector<RankInfo> ranks{owner(0, "a", {"r"}), owner(1, "b", {"r"}), owner(2, "", {"r"})};
  EXPECT_TRUE(waves(ranks, {true, false, true}).empty()) << "rank 1 receives its program: it compiles nothing";
  EXPECT_TRUE(waves({owner(0, "a", {"r"}), owner(1, "", {"r"})}).empty()) << "no store: compiles its own";
}

TEST(RegionPlan, TheRegionsTravelInTheRankReport) {
  RankInfo i = owner(3, "id1:64768:1234", {"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"});
  i.failure = "a\tb";
  const RankInfo back = RankInfo::decode(i.encode());
  EXPECT_EQ(back.regions, i.regions);
  EXPECT_EQ(back.store, i.store);
  EXPECT_EQ(back.graph_key, i.graph_key);
  EXPECT_TRUE(RankInfo::decode(owner(0, "", {}).encode()).regions.empty());
}

// A report naming a region twice (a rank of another npucache, or a
// hostile one) is refused, the same on every rank, which all decode every
// report; the plan itself lists a rank once per region whatever it is
// given, so no sender sends a region twice to a receiver that takes it
// once (the second copy would wait out the step's deadline, or be taken
// for the next region's file).
TEST(RegionPlan, AReportNamingARegionTwiceIsRefusedAndThePlanListsEachRankOnce) {
  const std::string k = "0123456789abcdef0123456789abcdef";
  const RankInfo twice = owner(1, "b", {k, k});
  try {
    (void)RankInfo::decode(twice.encode());
    FAIL() << "a report naming a region twice was decoded";
  } catch (const npucache::CommError& e) {
    EXPECT_NE(std::string(e.what()).find("names region " + k + " twice"), std::string::npos) << e.what();
  }
  const RegionPlan p = waves({owner(0, "a", {k}), twice, owner(2, "b", {k, k})});
  ASSERT_EQ(p.transfers.size(), 1u);
  EXPECT_EQ(p.transfers[0].from, 0);
  EXPECT_EQ(p.transfers[0].to, (std::vector<int>{1, 2}));
}
