// The coordinator's pure parts: the plan (one writer per store, by store
// identity), the routes of the node-leader exchange, the host map, the job
// identity handshake's messages, the agreement's decision and the hash.
#include "cache/method_cache.h"
#include "coord/agreement.h"
#include "coord/context.h"
#include "coord/hash.h"
#include "coord/host_allgather.h"
#include "coord/job_identity.h"
#include "coord/plan.h"
#include "coord/remote_plan.h"
#include "coord/routes.h"
#include "mpi/comm.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "storage/dir.h"
#include "storage/store.h"

#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

using namespace npucache;
using namespace npucache::coord;

namespace {

RankInfo needer(const std::string& key, const std::string& store) {
  RankInfo r;
  r.graph_key = key;
  r.cost = 10;
  r.needs = true;
  r.store = store;
  return r;
}

// For each receiver: how many times it receives, and from whom; the bytes
// that cross hosts when every transfer carries one artifact.
struct Walk {
  std::map<int, int> received;
  int across = 0;
};

Walk walk(const std::map<int, Route>& routes, int owner, const std::vector<int>& host_of) {
  Walk w;
  for (const auto& [r, route] : routes)
    for (int c : route.children) {
      ++w.received[c];
      EXPECT_EQ(routes.at(c).parent, r) << "rank " << c << " has another parent than the rank sending to it";
      if (host_of[static_cast<std::size_t>(c)] != host_of[static_cast<std::size_t>(r)]) ++w.across;
    }
  EXPECT_EQ(routes.at(owner).parent, -1);
  return w;
}

}  // namespace

TEST(Plan, RanksReportingOneStoreIdentityElectOneWriterOnAnyNumberOfHosts) {
  // Four hosts of two ranks sharing one directory (one identity: marker id,
  // device, inode), as on a network file system.
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(needer(r % 2 ? "k1" : "k0", "id1:64768:1234"));
  const Plan p = make_plan(ranks);
  ASSERT_EQ(p.store_writer.size(), 1u);
  EXPECT_EQ(p.store_writer[0], 0);
  for (int g : p.store_group) EXPECT_EQ(g, 0);
  // Exactly one rank ships each key's object to that one writer.
  int shipped = 0;
  for (bool b : p.ships_object) shipped += b;
  EXPECT_EQ(shipped, 2);
}

TEST(Plan, NodeLocalDirectoriesOfOnePathAreOneStoreEach) {
  // The same path on four hosts, each a different file system: different
  // marker ids (and devices), so four stores, each with its own writer.
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(needer("k", "id" + std::to_string(r / 2) + ":45:2"));
  const Plan p = make_plan(ranks);
  EXPECT_EQ(p.store_writer, (std::vector<int>{0, 2, 4, 6}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(p.store_group[static_cast<std::size_t>(r)], r / 2);
  int shipped = 0;
  for (bool b : p.ships_object) shipped += b;
  EXPECT_EQ(shipped, 4);  // each store gets the object once
}

// A rank whose cache is refused or unusable reports no store: it is no
// store's member, writer or shipper, and the others' stores are as before.
TEST(Plan, ARankWithoutAStoreWritesNothing) {
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(needer("k", "shared"));
  ranks[0].store.clear();
  const Plan p = make_plan(ranks);
  EXPECT_EQ(p.store_group, (std::vector<int>{-1, 0, 0, 0}));
  EXPECT_EQ(p.store_writer, (std::vector<int>{1}));
  EXPECT_EQ(p.ships_object, (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(RankInfo::decode(ranks[0].encode()).store, "");
}

// A rank report is bounded: it carries at most kMaxRankRegions region keys
// (the rest compile where they are called), and a report naming more, or
// naming anything but region keys, is refused with what it held.
TEST(Plan, ARankReportCarriesBoundedRegionKeys) {
  RankInfo r = needer("k", "s");
  for (std::size_t k = 0; k < kMaxRankRegions + 10; ++k) {
    char key[33];
    std::snprintf(key, sizeof key, "%032zx", k);
    r.regions.push_back(key);
  }
  const RankInfo back = RankInfo::decode(r.encode());
  ASSERT_EQ(back.regions.size(), kMaxRankRegions);
  EXPECT_EQ(back.regions.back(), r.regions[kMaxRankRegions - 1]);
  EXPECT_EQ(back.store, "s");

  // A hand-made report with one key too many, and one with a path.
  std::string many = "k\t10\t1\t0\t0\t\t";
  for (std::size_t k = 0; k <= kMaxRankRegions; ++k) many += (k ? "," : "") + r.regions[k];
  try {
    RankInfo::decode(many + "\ts");
    FAIL() << "a report of too many regions was taken";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1024 regions"), std::string::npos) << e.what();
  }
  try {
    RankInfo::decode("k\t10\t1\t0\t0\t\t" + r.regions[0] + ",../../x\ts");
    FAIL() << "a report naming a path as a region was taken";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("'../../x' as a region"), std::string::npos) << e.what();
  }
}

TEST(Plan, AHolderOnAnotherHostOwnsTheKey) {
  // Elastic reuse: the hosts that ran the job before hold the artifact.
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) {
    RankInfo i = needer("k", "store" + std::to_string(r / 2));
    i.needs = r >= 4;  // hosts 2 and 3 are new
    i.holds = r < 4;
    ranks.push_back(i);
  }
  const Plan p = make_plan(ranks);
  ASSERT_EQ(p.owner.size(), 1u);
  EXPECT_LT(p.owner[0], 4);
  for (double l : p.load) EXPECT_EQ(l, 0);  // nothing compiled
}

TEST(Routes, NodeLeaderSendsOncePerHostAndReachesEveryReceiverOnce) {
  for (int hosts : {1, 2, 3, 4, 8, 512}) {
    for (int per : {1, 2, 8}) {
      std::vector<int> host_of;
      for (int r = 0; r < hosts * per; ++r) host_of.push_back(r / per);
      const int owner = per > 1 ? 1 : 0;  // not the host's lowest rank
      std::vector<int> receivers;
      for (int r = 0; r < hosts * per; ++r)
        if (r != owner) receivers.push_back(r);
      const auto routes = node_leader_routes(owner, receivers, host_of);
      const Walk w = walk(routes, owner, host_of);
      EXPECT_EQ(w.across, hosts - 1) << hosts << "x" << per;
      EXPECT_EQ(w.received.size(), receivers.size());
      for (const auto& [r, n] : w.received) EXPECT_EQ(n, 1) << "rank " << r;
      // Depth: at most ceil(log2 H) + ceil(log2 R) hops.
      int depth = 0;
      for (int r : receivers) {
        int d = 0;
        for (int q = r; routes.at(q).parent >= 0; q = routes.at(q).parent) ++d;
        depth = std::max(depth, d);
      }
      int bound = 0;
      for (int n = 1; n < hosts; n *= 2) ++bound;
      for (int n = 1; n < per; n *= 2) ++bound;
      EXPECT_LE(depth, bound) << hosts << "x" << per;
    }
  }
}

TEST(Routes, OnlyHostsWithReceiversGetTheArtifact) {
  const std::vector<int> host_of{0, 0, 1, 1, 2, 2, 3, 3};
  const auto routes = node_leader_routes(0, {1, 5, 7}, host_of);  // hosts 0, 2, 3
  EXPECT_FALSE(routes.count(2));
  EXPECT_FALSE(routes.count(3));
  EXPECT_FALSE(routes.count(4));
  EXPECT_EQ(walk(routes, 0, host_of).across, 2);
}

TEST(Routes, FlatTreeIgnoresHosts) {
  // A binomial tree in rank order (MPI_Bcast's) crosses hosts H - 1 times
  // when ranks are placed host by host, but more for other placements;
  // the node-leader tree crosses H - 1 times always.
  const std::vector<int> receivers{1, 2, 3, 4, 5, 6, 7};
  const std::vector<int> by_host{0, 0, 1, 1, 2, 2, 3, 3};
  EXPECT_EQ(walk(flat_routes(0, receivers), 0, by_host).across, 3);
  const std::vector<int> round_robin{0, 1, 2, 3, 0, 1, 2, 3};
  EXPECT_EQ(walk(flat_routes(0, receivers), 0, round_robin).across, 6);
  EXPECT_EQ(walk(node_leader_routes(0, receivers, round_robin), 0, round_robin).across, 3);
  const std::vector<int> scattered{0, 1, 1, 0, 0, 1, 1, 0};
  EXPECT_EQ(walk(flat_routes(0, receivers), 0, scattered).across, 6);
  EXPECT_EQ(walk(node_leader_routes(0, receivers, scattered), 0, scattered).across, 1);
}

TEST(Hosts, NumberedByTheirLowestRank) {
  const Hosts h = hosts_from({{"a", {3, 2}}, {"c", {4}}, {"b", {0, 1}}}, 5);
  EXPECT_EQ(h.host_of, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(h.names, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_THROW(hosts_from({{"a", {0, 1}}, {"b", {1}}}, 2), CommError);
  EXPECT_THROW(hosts_from({{"a", {0}}}, 2), CommError);
}

TEST(JobIdentity, NamesTheRanksAndTheFieldsThatDiffer) {
  auto id = [](const std::string& pp, bool ge) {
    JobIdentity i{{"command", "warmup"}, {"--tp", "2"}, {"--pp", pp}};
    if (ge) i.push_back({"--ge-cache", ""});
    return i;
  };
  EXPECT_EQ(describe_mismatch({id("1", false), id("1", false)}), "");
  EXPECT_EQ(describe_mismatch({id("1", false), id("1", false), id("2", false), id("2", false)}),
            "ranks 0, 1 have --pp 1, ranks 2, 3 have --pp 2");
  EXPECT_EQ(describe_mismatch({id("1", false), id("1", true), id("1", false)}),
            "ranks 0, 2 have no --ge-cache, rank 1 has --ge-cache");
  EXPECT_EQ(describe_mismatch({id("1", false), id("2", true)}),
            "rank 0 has --pp 1, rank 1 has --pp 2; rank 0 has no --ge-cache, rank 1 has --ge-cache");
}

TEST(JobIdentity, ADifferentSubcommandIsTheOneDifferenceNamed) {
  JobIdentity w{{"command", "warmup"}, {"--tp", "2"}, {"--mode", "max-autotune"}};
  JobIdentity g{{"command", "generate"}, {"--tp", "2"}, {"--tokens", "16"}};
  EXPECT_EQ(describe_mismatch({w, w, w, g}), "ranks 0-2 run `npucache warmup`, rank 3 runs `npucache generate`");
}

TEST(JobIdentity, EncodingRoundTripsAndHashesStably) {
  JobIdentity id{{"command", "infer"}, {"--cache-dir", "a=b\nc\\d"}};
  EXPECT_EQ(decode(encode(id))[1].value, "a=b\nc\\d");
  EXPECT_EQ(identity_hash(encode(id)), identity_hash(encode(id)));
  EXPECT_NE(identity_hash(encode(id)), identity_hash(encode({{"command", "warmup"}})));
  EXPECT_EQ(identity_hash(""), 1469598103934665603ull);  // FNV-1a offset basis: the same on every build
}

TEST(RankList, JoinsRanges) {
  EXPECT_EQ(mpi::rank_list({3}), "rank 3");
  EXPECT_EQ(mpi::rank_list({3, 0, 1, 2, 6}), "ranks 0-3, 6");
  EXPECT_EQ(mpi::rank_list({2, 3}), "ranks 2, 3");
}

TEST(HostAllgather, TableFoldsEqualRecordsAndRoundTrips) {
  // Two hosts of four ranks; each tensor-parallel pair reports one record.
  std::vector<std::pair<int, std::string>> recs;
  for (int r = 0; r < 8; ++r) recs.emplace_back(r, "key" + std::to_string(r / 2) + "\tstore" + std::to_string(r / 4));
  const auto entries = fold(recs);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].ranks, (std::vector<int>{0, 1}));
  const auto back = unfold(decode_table(encode_table(entries)), 8);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(back[static_cast<std::size_t>(r)], recs[static_cast<std::size_t>(r)].second);
  // Runs keep the table small: 4 entries of 2 ranks each.
  EXPECT_LT(encode_table(entries).size(), 4 * (4 + 12 + 4 + 8) + 4 + 1);
}

TEST(HostAllgather, AMissingOrRepeatedRankIsAnError) {
  EXPECT_THROW(unfold({{"a", {0}}, {"b", {2}}}, 3), CommError);
  EXPECT_THROW(unfold({{"a", {0, 1}}, {"b", {1}}}, 2), CommError);
  EXPECT_THROW(decode_table(std::string("\x05\0\0\0", 4)), CommError);
}

// The remote tier as a source: one fetcher per host for each key no store
// holds, only when every rank has the remote; within-host routes only.
TEST(RemotePlan, OneFetcherPerHostForKeysNoStoreHolds) {
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) {
    RankInfo i = needer(r % 2 ? "odd" : "even", "store" + std::to_string(r));
    i.remote = true;
    ranks.push_back(i);
  }
  ranks[6].holds = true;  // a store holds "even": read locally, not from the remote
  const std::vector<int> host_of{0, 0, 0, 0, 1, 1, 1, 1};
  const Plan plan = make_plan(ranks);
  const RemoteFetch f = plan_remote(plan, ranks, host_of);
  ASSERT_EQ(f.groups.size(), 1u);
  EXPECT_EQ(plan.keys[static_cast<std::size_t>(f.groups[0])], "odd");
  EXPECT_EQ(f.fetchers.at(f.groups[0]), (std::vector<int>{1, 5}));
  const auto routes = host_routes({1, 5}, {1, 3, 5, 7}, host_of);
  EXPECT_EQ(routes.at(1).parent, -1);
  EXPECT_EQ(routes.at(3).parent, 1);
  EXPECT_EQ(routes.at(5).parent, -1);
  EXPECT_EQ(routes.at(7).parent, 5);
  ranks[3].remote = false;  // a rank without the remote: nobody reads it
  EXPECT_TRUE(plan_remote(plan, ranks, host_of).groups.empty());
  EXPECT_EQ(RankInfo::decode(ranks[0].encode()).remote, true);
}

namespace {

// This rank's failure from throwing `e` in `phase`.
template <class E>
LocalFailure failing(Phase phase, const std::string& what, bool cache_errors_survivable = false) {
  try {
    throw E(what);
  } catch (...) {
    return LocalFailure::current(phase, cache_errors_survivable);
  }
}

// decide() as rank `me` sees it: the class and message it throws, or "".
template <class E>
std::string thrown(const std::vector<std::string>& all, const LocalFailure& mine, int me) {
  try {
    decide(all, mine, me, "m");
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("another class: ") + e.what();
  }
  return "";
}

}  // namespace

TEST(Agreement, NothingFailedGoesOn) {
  const Agreed a = decide({"", "", ""}, LocalFailure{}, 1, "m");
  EXPECT_FALSE(a.survivable);
  EXPECT_EQ(a.failed, 0);
  EXPECT_EQ(LocalFailure{}.flag(), 0u);
  EXPECT_EQ(LocalFailure{}.encode(), "");
}

TEST(Agreement, OneFatalFailureIsTheSameTypedErrorOnEveryRank) {
  const LocalFailure f = failing<ConfigError>(Phase::compile, "bad option");
  EXPECT_EQ(f.severity(), LocalFailure::Severity::fatal);
  const std::vector<std::string> all{"", f.encode(), ""};
  for (int me : {0, 1, 2}) {
    const std::string what = thrown<ConfigError>(all, me == 1 ? f : LocalFailure{}, me);
    EXPECT_NE(what.find("cache_compile of m: rank 1 failed in phase compile (compiling or reading the program it "
                        "owns): bad option"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("stops with it") != std::string::npos, me != 1) << what;
  }
}

TEST(Agreement, EveryClassTravelsAndNoneBecomesACommError) {
  const std::vector<std::string> none{"", ""};
  auto at1 = [&](const LocalFailure& f) { return std::vector<std::string>{"", f.encode()}; };
  EXPECT_NE(thrown<ConfigError>(at1(failing<ConfigError>(Phase::arrival, "c")), {}, 0), "");
  EXPECT_NE(thrown<TraceError>(at1(failing<TraceError>(Phase::plan, "t")), {}, 0), "");
  EXPECT_NE(thrown<ShapeError>(at1(failing<ShapeError>(Phase::compile, "s")), {}, 0), "");
  EXPECT_NE(thrown<VerifyError>(at1(failing<VerifyError>(Phase::load, "v")), {}, 0), "");
  EXPECT_NE(thrown<DeviceError>(at1(failing<DeviceError>(Phase::exchange, "d")), {}, 0), "");
  EXPECT_NE(thrown<MetaTensorError>(at1(failing<MetaTensorError>(Phase::load, "x")), {}, 0), "");
  EXPECT_NE(thrown<CacheError>(at1(failing<CacheError>(Phase::load, "k")), {}, 0), "");
  const std::string other = thrown<Error>(at1(failing<CommError>(Phase::compile, "comm")), {}, 0);
  EXPECT_NE(other.find("rank 1 failed in phase compile"), std::string::npos) << other;
  try {
    decide(at1(failing<CommError>(Phase::compile, "comm")), {}, 0, "m");
  } catch (const CommError& e) {
    ADD_FAILURE() << "a CommError: " << e.what();
  } catch (const Error&) {
  }
}

TEST(Agreement, CacheErrorsAreSurvivableOnlyWhereTheCallerSaysSo) {
  EXPECT_EQ(failing<CacheError>(Phase::load, "damaged").severity(), LocalFailure::Severity::fatal);
  EXPECT_EQ(failing<CacheRefused>(Phase::compile, "refused").severity(), LocalFailure::Severity::fatal);
  EXPECT_EQ(failing<CacheError>(Phase::persist, "full", true).severity(), LocalFailure::Severity::survivable);
  EXPECT_EQ(failing<CacheRefused>(Phase::persist, "refused", true).severity(), LocalFailure::Severity::survivable);
  EXPECT_EQ(failing<ConfigError>(Phase::persist, "bad", true).severity(), LocalFailure::Severity::fatal);
}

TEST(Agreement, SurvivableFailuresGoOnUncachedNamingTheLowestRank) {
  const LocalFailure full = failing<CacheError>(Phase::persist, "No space left on device", true);
  const LocalFailure refused = LocalFailure::survivable(Phase::arrival, "its cache /c is refused");
  EXPECT_EQ(refused.flag(), 1u);
  const Agreed a = decide({"", full.encode(), "", refused.encode()}, LocalFailure{}, 0, "m");
  EXPECT_TRUE(a.survivable);
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.phase, Phase::persist);
  EXPECT_EQ(a.failed, 2);
  EXPECT_EQ(a.warning("m"),
            "cache_compile of m: rank 1 failed in phase persist (saving the entries): No space left on device (2 "
            "ranks failed); every rank runs m uncached");
}

TEST(Agreement, AFatalFailureOutweighsSurvivableOnes) {
  const LocalFailure full = failing<CacheError>(Phase::persist, "full", true);
  const LocalFailure bad = failing<VerifyError>(Phase::persist, "bad program");
  const std::string what = thrown<VerifyError>({full.encode(), "", bad.encode()}, full, 0);
  EXPECT_NE(what.find("rank 2 failed in phase persist"), std::string::npos) << what;
  EXPECT_NE(what.find("(2 of 3 ranks failed)"), std::string::npos) << what;
}

// When every rank failed fatally each keeps its own exception (a graph
// break on every rank splits the method alike).
TEST(Agreement, EveryRankFailedKeepsItsOwnError) {
  const LocalFailure mine = failing<TraceError>(Phase::arrival, "mine");
  const LocalFailure theirs = failing<ConfigError>(Phase::arrival, "theirs");
  EXPECT_EQ(thrown<TraceError>({mine.encode(), theirs.encode()}, mine, 0), "mine");
}

// The values every build must give (the job identity and the config hash
// of reports are made with it).
TEST(Hash, IsTheSameOnEveryBuild) {
  EXPECT_EQ(stable_hash(""), 1469598103934665603ull);
  EXPECT_EQ(stable_hash("a"), 0x44bd8ad473cd9906ull);
  EXPECT_EQ(stable_hash("foobar"), 0x88fad7c0a8ff07f2ull);
  EXPECT_EQ(identity_hash("foobar"), stable_hash("foobar"));  // one function
}

namespace {
struct Doubled : nn::Module {
  Tensor run(const Tensor& x) const { return x * 2.0; }
};
CacheOptions dry_options(const std::string& method) {
  CacheOptions o;
  o.cache_dir = (std::filesystem::temp_directory_path() / "npucache-test-coord-never-made").string();
  o.compile.method_name = method;
  return o;
}
}  // namespace

// A dry run is the process's: a dry-run function is refused in a process
// that built real cached functions, and a real one in a dry-run process
// (each Scope is a process of its own); a write a dry run never reaches
// refuses to run in one.
TEST(DryRunProcess, IsNeverMixedWithFunctionsThatWrite) {
  Doubled m;
  dist::CoordinatorOptions dry;
  dry.dry_run = true;
  {
    const process::Context::Scope process;
    auto real = cache_compile(m, &Doubled::run, dry_options("real"));
    EXPECT_NO_THROW(cache::refuse_in_dry_run("saving"));
    try {
      dist::cache_compile(m, &Doubled::run, dry_options("dry"), dry);
      ADD_FAILURE() << "a dry-run function was built in a process with a real one";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("process of its own"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(process::dry_run());
  }
  {
    const process::Context::Scope process;
    auto predicted = dist::cache_compile(m, &Doubled::run, dry_options("dry"), dry);
    EXPECT_TRUE(process::dry_run());
    EXPECT_THROW(cache_compile(m, &Doubled::run, dry_options("real")), ConfigError);
    EXPECT_THROW(dist::cache_compile(m, &Doubled::run, dry_options("real"), dist::CoordinatorOptions{}), ConfigError);
    auto another = dist::cache_compile(m, &Doubled::run, dry_options("dry2"), dry);  // dry ones mix
    try {
      cache::refuse_in_dry_run("saving the entry x");
      ADD_FAILURE() << "a write was allowed in a dry run";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("saving the entry x in a dry run"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dry_options("").cache_dir);
}

// The place nearest_of_method names for an index's entry path; a path not
// under its model_info (damaged, or shorter) names none rather than failing.
TEST(DryRunProcess, EntryPlaceOfAnyIndexPath) {
  EXPECT_EQ(cache::entry_place("m1/world8global_rank3/prompt", "m1"), "world8global_rank3");
  EXPECT_EQ(cache::entry_place("m1/prompt", "m1"), "one process");
  EXPECT_EQ(cache::entry_place("m1", "m1"), "one process");
  EXPECT_EQ(cache::entry_place("m", "m1"), "one process");
  EXPECT_EQ(cache::entry_place("", "m1"), "one process");
  EXPECT_EQ(cache::entry_place("m2/world2global_rank0/x", "m1"), "one process");
  EXPECT_EQ(cache::entry_place("m1/", "m1"), "one process");
}

// The plan's store identity in a dry run, predicted writing nothing: an
// existing store's identity as a real open gives it, through a link too; a
// store.json a real open would heal is "healed"; a missing directory that
// could be made is not made, and one below a regular file cannot be.
TEST(DryRunProcess, StoreIdentityIsPredictedWithoutWriting) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("npucache-test-coord-identity-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  const fs::path dir = base / "cache";
  EXPECT_NO_THROW(storage::Dir::check_creatable(dir));
  EXPECT_FALSE(fs::exists(dir));
  { std::ofstream(base / "file") << "x"; }
  EXPECT_THROW(storage::Dir::check_creatable(base / "file" / "cache"), CacheError);
  const std::string real = storage::Store::open(dir, storage::Create::yes).identity();
  EXPECT_EQ(storage::Store::open(dir, storage::Create::no).predicted_identity(), real);
  fs::create_directory_symlink(dir, base / "link");
  EXPECT_EQ(storage::Store::open(base / "link", storage::Create::no).predicted_identity(), real);
  { std::ofstream(dir / "store.json", std::ios::trunc) << "{"; }
  const std::string healed = storage::Store::open(dir, storage::Create::no).predicted_identity();
  EXPECT_EQ(healed.substr(0, 7), "healed:") << healed;
  EXPECT_EQ(healed.substr(7), real.substr(33));  // the same device and inode
  std::ifstream in(dir / "store.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{");
  fs::remove_all(base);
}
