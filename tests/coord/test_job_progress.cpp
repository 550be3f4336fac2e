// Rank 0's job progress line (coord/job_progress.h): how each rank of a
// plan became ready, per host; the line's totals over methods and hosts;
// when it is printed (NPUCACHE_PROGRESS, --progress, a terminal).
#include "coord/job_progress.h"

#include <npucache/error.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace npucache;
using namespace npucache::coord;

namespace {

// Six ranks on two hosts (0-2, 3-5). Group 0 (ranks 0, 1, 3) is owned by
// rank 0, which compiles; group 1 (ranks 4, 5) by rank 4, whose store holds
// it; rank 2 hit its own entry.
struct Fixture {
  Plan plan;
  std::vector<RankInfo> ranks = std::vector<RankInfo>(6);
  std::vector<int> host_of{0, 0, 0, 1, 1, 1};
  Fixture() {
    plan.owner = {0, 4};
    plan.group_of = {0, 0, -1, 0, 1, 1};
    for (int r : {0, 1, 3, 4, 5}) ranks[static_cast<std::size_t>(r)].needs = true;
    ranks[4].holds = true;
  }
};

struct Env {
  Env(const char* name, const char* value) : name_(name) {
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~Env() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST(JobProgress, EachRankIsCountedOnceWhereItBecameReady) {
  Fixture f;
  const auto per_host = outcomes(f.plan, f.ranks, f.plan.owner, f.host_of, 2);
  ASSERT_EQ(per_host.size(), 2u);
  EXPECT_EQ(per_host[0].loaded, 1);    // rank 2's own entry
  EXPECT_EQ(per_host[0].compiled, 1);  // rank 0
  EXPECT_EQ(per_host[0].received, 1);  // rank 1
  EXPECT_EQ(per_host[1].loaded, 1);    // rank 4 read its store
  EXPECT_EQ(per_host[1].received, 2);  // ranks 3 and 5
  EXPECT_EQ(per_host[0].total() + per_host[1].total(), 6);
}

TEST(JobProgress, GroupsTheRemoteTierServedAreReceivedEverywhere) {
  Fixture f;
  const auto per_host = outcomes(f.plan, f.ranks, {-1, 4}, f.host_of, 2);
  EXPECT_EQ(per_host[0].compiled, 0);
  EXPECT_EQ(per_host[0].received, 2);  // ranks 0 and 1 from the remote tier
  EXPECT_EQ(per_host[1].received, 2);
  // Without a map of hosts every rank counts on one.
  const auto one = outcomes(f.plan, f.ranks, f.plan.owner, {}, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].total(), 6);
}

TEST(JobProgress, TheLineSumsMethodsAndHostsOfTheJob) {
  Env forced("NPUCACHE_PROGRESS", "1");
  JobProgress p;
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  p.set_output(out);
  p.configure(ProgressMode::never, 2);  // the variable wins
  Fixture f;
  p.compiling("prompt", 1, 1, 6);
  p.finished("prompt", 6, outcomes(f.plan, f.ranks, f.plan.owner, f.host_of, 2), {"a", "b"}, false, 0.5);
  EXPECT_EQ(p.line(),
            "1/2 methods (prompt 0.50 s), 6/12 rank-methods ready: 2 loaded, 1 compiled, 3 received; "
            "a 3 (1 loaded, 1 compiled, 1 received); b 3 (1 loaded, 0 compiled, 2 received); 0.50 s in all");
  // A method without a map of hosts (every rank hit, none made) adds to
  // the job's totals only.
  p.finished("decode", 6, {coord::Outcome{6, 0, 0}}, {}, false, 0.25);
  EXPECT_EQ(p.line(),
            "2/2 methods (decode 0.25 s), 12/12 rank-methods ready: 8 loaded, 1 compiled, 3 received; "
            "a 3 (1 loaded, 1 compiled, 1 received); b 3 (1 loaded, 0 compiled, 2 received); 0.75 s in all");
  std::rewind(out);
  char buf[4096] = {0};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, out);
  std::fclose(out);
  const std::string printed(buf, n);
  EXPECT_NE(printed.find("npucache: prompt: compiling 1 subgraph on 1 of 6 ranks"), std::string::npos) << printed;
  EXPECT_NE(printed.find("npucache: 1/2 methods (prompt"), std::string::npos) << printed;
  EXPECT_NE(printed.find("npucache: 2/2 methods (decode"), std::string::npos) << printed;
}

// A first method where every rank hit makes no map of hosts; once a later
// method makes it, each host's count includes its ranks' loads of the
// first: the hosts add up to the job's total.
TEST(JobProgress, HostsCountMethodsThatHitBeforeTheMapWasMade) {
  Env forced("NPUCACHE_PROGRESS", "0");
  JobProgress p;
  p.configure(ProgressMode::never, 2);
  Fixture f;
  p.finished("prompt", 6, {coord::Outcome{6, 0, 0}}, {}, false, 0.01);
  p.finished("decode", 6, outcomes(f.plan, f.ranks, f.plan.owner, f.host_of, 2), {"a", "b"}, false, 0.5);
  EXPECT_EQ(p.line(),
            "2/2 methods (decode 0.50 s), 12/12 rank-methods ready: 8 loaded, 1 compiled, 3 received; "
            "a 6 (4 loaded, 1 compiled, 1 received); b 6 (4 loaded, 0 compiled, 2 received); 0.51 s in all");
}

TEST(JobProgress, QuietUnlessAskedOrOnATerminal) {
  Env unset("NPUCACHE_PROGRESS", nullptr);
  Env not_tty("NPUCACHE_STDERR_IS_TTY", nullptr);
  JobProgress p;
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  p.set_output(out);
  p.configure(ProgressMode::never, 2);
  EXPECT_FALSE(p.enabled());
  p.configure(ProgressMode::always, 2);
  EXPECT_TRUE(p.enabled());
  {
    Env off("NPUCACHE_PROGRESS", "0");
    EXPECT_FALSE(p.enabled());
  }
  p.configure(ProgressMode::auto_, 2);
  {
    Env launcher_tty("NPUCACHE_STDERR_IS_TTY", "1");  // the launcher's stderr is a terminal
    EXPECT_TRUE(p.enabled());
  }
  // auto, stderr of a test is not a terminal under ctest: nothing printed,
  // though the line is still made.
  if (!::isatty(2)) {
    EXPECT_FALSE(p.enabled());
    p.finished("prompt", 2, {coord::Outcome{2, 0, 0}}, {}, false, 0.1);
    EXPECT_FALSE(p.line().empty());
    EXPECT_EQ(std::ftell(out), 0);
  }
  std::fclose(out);
}

TEST(JobProgress, ModesAreNamedInTheError) {
  EXPECT_EQ(parse_progress_mode("always"), ProgressMode::always);
  try {
    parse_progress_mode("sometimes");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("auto, always or never"), std::string::npos);
  }
}
