// The job report (coord/job_report.h): assembled from crafted per-rank
// reports, the totals over ranks, the step table and the subgraphs; the
// JSON of the per-rank exchange and of the --report-json file, with every
// field name the tests, perf/ scripts and docs read, round-tripped without
// truncation however large.
#include "coord/job_report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

using namespace npucache;
using namespace npucache::coord;
using json = nlohmann::json;

namespace {

// A coordinated method on one rank, its step times scaled by `scale`.
RankMethod coordinated(const std::string& method, const std::string& key, double scale, double start) {
  RankMethod m;
  m.report.method = method;
  m.report.graph_key = key;
  m.report.compile_s = 0.5 * scale;
  m.report.exchange_s = 0.01 * scale;
  m.report.persist_s = 0.02 * scale;
  m.report.total_s = 1.0 * scale;
  m.report.pass_times_s = {{"decompose", 0.001}, {"fusion", 0.002}, {"autotune", 0.3}};
  dist::StepReport s;
  s.method = method;
  s.setup_s = 0.001 * scale;
  s.lookup_s = 0.002 * scale;
  s.arrival_s = 0.003 * scale;
  s.keys_s = 0.004 * scale;
  s.plan_s = 0.005 * scale;
  s.remote_s = 0.006 * scale;
  s.produce_s = 0.007 * scale;
  s.status_s = 0.008 * scale;
  s.exchange_s = 0.009 * scale;
  s.load_s = 0.010 * scale;
  s.persist_s = 0.011 * scale;
  s.save_s = 0.012 * scale;
  s.started_at = start;
  s.ended_at = start + scale;
  m.steps = s;
  return m;
}

JobInfo job_info(int world) {
  JobInfo j;
  j.model = "tiny-llama";
  j.architecture = "LlamaForCausalLM";
  j.layers = 4;
  j.hidden = 64;
  j.weights = "meta";
  j.world_size = world;
  j.tp = 2;
  j.pp = 2;
  j.backend = "npu";
  j.mode = "max-autotune";
  j.dynamic = "true";
  j.wall_s = 1.25;
  return j;
}

// Four ranks, tp 2 x pp 2 on two hosts: ranks 0 and 2 compile the prompt
// and decode of their stage, ranks 1 and 3 fetch them; rank 1 read one
// artifact from the remote tier; ranks 0 and 2 write their stores' entries.
std::vector<RankReport> four_ranks() {
  std::vector<RankReport> ranks(4);
  for (int r = 0; r < 4; ++r) {
    RankReport& rr = ranks[r];
    rr.rank = r;
    rr.peak_rss_bytes = (10 + static_cast<std::size_t>(r)) << 20;
    rr.captures = {static_cast<std::size_t>(r), 1, r == 3 ? 2u : 0u};
    const std::string stage = r < 2 ? "aaaa" : "bbbb";
    for (const char* method : {"prompt", "decode"}) {
      RankMethod m = coordinated(method, stage + method + "0123456789abcdef", 1.0 + r, 100.0 + r);
      const bool owner = r % 2 == 0;
      m.report.compiled = owner;
      m.report.fetched = !owner;
      m.report.owner = r - r % 2;
      m.report.compile_cpu_s = owner ? 0.25 + r : 0;
      m.report.bytes_received = owner ? 0 : 1000;
      m.report.writer = owner;
      m.report.kernels_tuned = owner ? 3 : 0;
      m.report.kernels_reused = owner ? 1 : 0;
      m.steps->hosts = 2;
      m.steps->entries_written = owner ? 2 : 0;
      m.steps->bytes_between_hosts = owner ? 0 : 400;
      m.steps->flat_bytes_between_hosts = owner ? 0 : 1000;
      rr.methods.push_back(m);
    }
  }
  ranks[1].methods[0].report.remote = true;
  ranks[1].methods[0].report.remote_bytes = 777;
  return ranks;
}

// A warm job where every rank hit makes no map of hosts (its steps say 0
// hosts): the report counts the ranks' host names instead.
TEST(JobReport, HostsOfAWarmJobAreTheRanksDistinctHostNames) {
  std::vector<RankReport> ranks = four_ranks();
  for (RankReport& r : ranks) {
    r.host = r.rank < 2 ? "node-a" : "node-b";
    for (RankMethod& m : r.methods) m.steps->hosts = 0;
  }
  EXPECT_EQ(assemble_job_report(job_info(4), ranks).hosts, 2);
  ranks[3].host = "node-c";
  EXPECT_EQ(assemble_job_report(job_info(4), ranks).hosts, 3);
  // The name travels in the per-rank JSON.
  const RankReport back = json(ranks[3]).get<RankReport>();
  EXPECT_EQ(back.host, "node-c");
}

TEST(JobReport, TotalsOverRanks) {
  const JobReport r = assemble_job_report(job_info(4), four_ranks());
  EXPECT_EQ(r.hosts, 2);
  EXPECT_EQ(r.unique_subgraphs, 4u);
  EXPECT_EQ(r.compiled, 4);
  EXPECT_EQ(r.fetched, 4);
  EXPECT_EQ(r.loaded, 0);
  EXPECT_EQ(r.remote_reads, 1);
  EXPECT_EQ(r.remote_bytes_read, 777u);
  EXPECT_EQ(r.writers, 4);
  EXPECT_EQ(r.entries_written, 8);
  EXPECT_EQ(r.kernels_tuned, 12);
  EXPECT_EQ(r.kernels_reused, 4);
  EXPECT_EQ(r.captures.recorded, 0u + 1 + 2 + 3);
  EXPECT_EQ(r.captures.restored, 4u);
  EXPECT_EQ(r.captures.recaptured, 2u);
  EXPECT_EQ(r.max_peak_rss_bytes, 13u << 20);
  // Ranks 0 and 2 compiled both methods: 2 x 0.25 + 2 x 2.25.
  EXPECT_DOUBLE_EQ(r.compile_cpu_s, 5.0);
  EXPECT_EQ(r.bytes_exchanged, 4000u);
  EXPECT_EQ(r.bytes_between_hosts, 1600u);
  EXPECT_EQ(r.flat_bytes_between_hosts, 4000u);
  // The longest of any rank-method: rank 3's (scale 4).
  EXPECT_DOUBLE_EQ(r.exchange_s, 0.04);
  EXPECT_DOUBLE_EQ(r.persist_s, 0.08);
  EXPECT_DOUBLE_EQ(r.exchange_gbps(), 4000 / 0.04 / 1e9);
  EXPECT_EQ(r.rank_methods(), 8u);
  ASSERT_EQ(r.per_rank.size(), 4u);
  EXPECT_EQ(r.per_rank[2].graph_keys(),
            (std::vector<std::string>{"bbbbprompt0123456789abcdef", "bbbbdecode0123456789abcdef"}));
  EXPECT_FALSE(r.per_rank[0].hit());
  EXPECT_DOUBLE_EQ(r.per_rank[2].compile_cpu_s(), 2 * 2.25);
  EXPECT_DOUBLE_EQ(r.per_rank[3].compile_s(), 2 * 0.5 * 4);
}

TEST(JobReport, StepsAreTheSlowestAndFastestRanksSummedOverMethods) {
  const JobReport r = assemble_job_report(job_info(4), four_ranks());
  ASSERT_EQ(r.method_steps.size(), 2u);
  EXPECT_EQ(r.method_steps[0].method, "prompt");  // first-call order
  EXPECT_EQ(r.method_steps[1].method, "decode");
  for (std::size_t i = 0; i < kStepNames.size(); ++i) {
    const double unit = 0.001 * static_cast<double>(i + 1);
    SCOPED_TRACE(std::string(kStepNames[i]));
    EXPECT_DOUBLE_EQ(r.method_steps[0].max_s[i], unit * 4);  // rank 3
    EXPECT_DOUBLE_EQ(r.method_steps[0].min_s[i], unit * 1);  // rank 0
    EXPECT_DOUBLE_EQ(r.steps_s[i], 2 * unit * 4);
    EXPECT_DOUBLE_EQ(r.steps_min_s[i], 2 * unit * 1);
  }
  // Each method: the last rank began at 103 (rank 3) and the last ended at
  // 107 (rank 3: 103 + 4).
  EXPECT_DOUBLE_EQ(r.method_steps[0].coordination_s(), 4.0);
  EXPECT_DOUBLE_EQ(r.coordination_s, 8.0);
}

TEST(JobReport, SubgraphsNameTheRanksThatCompiledThem) {
  std::vector<RankReport> ranks = four_ranks();
  // Independent: every rank of a stage compiles (no steps).
  for (auto& r : ranks)
    for (auto& m : r.methods) {
      m.report.compiled = true;
      m.report.compile_cpu_s = 1;
      m.steps.reset();
    }
  const JobReport r = assemble_job_report(job_info(4), ranks);
  ASSERT_EQ(r.subgraphs.size(), 4u);
  EXPECT_EQ(r.subgraphs[0].graph_key, "aaaadecode0123456789abcdef");  // by key
  EXPECT_EQ(r.subgraphs[0].compiled_by, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(r.subgraphs[0].compile_cpu_s, 2.0);
  EXPECT_EQ(r.subgraphs[3].compiled_by, (std::vector<int>{2, 3}));
  // No coordinated method: one host, no steps, no entries counted.
  EXPECT_EQ(r.hosts, 1);
  EXPECT_TRUE(r.method_steps.empty());
  EXPECT_EQ(r.steps_s, StepTimes{});
  EXPECT_EQ(r.entries_written, 0);
  EXPECT_EQ(r.compiled, 8);
}

TEST(JobReport, AWarmJobHitsEverywhere) {
  std::vector<RankReport> ranks = four_ranks();
  for (auto& r : ranks)
    for (auto& m : r.methods) {
      MethodReport hit;
      hit.method = m.report.method;
      hit.graph_key = m.report.graph_key;
      hit.hit = true;
      m.report = hit;
      m.steps->all_hit = true;
    }
  const JobReport r = assemble_job_report(job_info(4), ranks);
  EXPECT_EQ(r.loaded, 8);
  EXPECT_EQ(r.compiled, 0);
  EXPECT_TRUE(r.per_rank[1].hit());
  for (const auto& s : r.subgraphs) EXPECT_TRUE(s.compiled_by.empty());
  EXPECT_EQ(r.unique_subgraphs, 4u);
}

// The fields the tests (tests/mpi, tests/support, tests/tools), perf/
// scripts and docs read, at the top level and per rank and method.
// The rank-methods whose own entry missed are summed by cause (the rank's
// full reason when a report carries no cause), hits are not misses, and
// the sums round-trip through the file.
TEST(JobReport, MissesAreSummedByCause) {
  std::vector<RankReport> ranks = four_ranks();
  const std::string layout = "absent: another layout (stored world 8 tp 2 pp 4, now world 4 tp 2 pp 2)";
  for (auto& r : ranks)
    for (auto& m : r.methods) {
      m.report.reason = "absent (another layout (...); nearest entry M/world8global_rank" + std::to_string(r.rank) +
                        "/" + m.report.method + ")";
      m.report.cause = layout;
    }
  ranks[3].methods[1].report.cause.clear();
  ranks[3].methods[1].report.reason = "corrupt (bad checksum)";
  ranks[2].methods[0].report.hit = true;  // a hit is no miss, whatever its fields say
  JobReport r = assemble_job_report(job_info(4), ranks);
  const std::map<std::string, int> expected = {{layout, 6}, {"corrupt (bad checksum)", 1}};
  EXPECT_EQ(r.misses, expected);
  const json j = r;
  ASSERT_TRUE(j.at("misses").is_object()) << j.dump();
  EXPECT_EQ(j.at("misses").at(layout), 6);
  EXPECT_EQ(j.at("per_rank")[0].at("methods")[0].at("cause"), layout);
  EXPECT_EQ(j.get<JobReport>().misses, expected);
}

TEST(JobReport, JsonHasEveryFieldOfTheFormat) {
  JobReport r = assemble_job_report(job_info(4), four_ranks());
  r.generation = GenerationReport{0.5, 0.002, 0.001, {1, 2, 3}, std::nullopt};
  const json j = r;
  for (const char* k : {"model",
                        "architecture",
                        "layers",
                        "weights",
                        "max_peak_rss_bytes",
                        "world_size",
                        "tp",
                        "pp",
                        "backend",
                        "mode",
                        "dynamic",
                        "independent",
                        "flat_exchange",
                        "hosts",
                        "unique_subgraphs",
                        "compiled",
                        "loaded",
                        "fetched",
                        "remote_reads",
                        "remote_bytes_read",
                        "writers",
                        "kernels_tuned",
                        "kernels_reused",
                        "captures_recorded",
                        "captures_restored",
                        "captures_recaptured",
                        "entries_written",
                        "wall_s",
                        "compile_cpu_s",
                        "bytes_exchanged",
                        "bytes_between_hosts",
                        "flat_bytes_between_hosts",
                        "exchange_s",
                        "exchange_gbps",
                        "persist_s",
                        "steps_s",
                        "steps_min_s",
                        "coordination_s",
                        "per_rank",
                        "time_to_ready_s",
                        "time_to_first_token_s",
                        "per_token_s",
                        "tokens",
                        "tokens_match_single_process"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["tp"], 2);
  EXPECT_EQ(j["weights"], "meta");
  EXPECT_EQ(j["compiled"], 4);
  EXPECT_EQ(j["remote_bytes_read"], 777);
  EXPECT_EQ(j["captures_recorded"], 6);
  EXPECT_DOUBLE_EQ(j["wall_s"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(j["steps_s"]["produce"].get<double>(), 2 * 0.007 * 4);
  EXPECT_DOUBLE_EQ(j["steps_min_s"]["setup"].get<double>(), 2 * 0.001);
  EXPECT_TRUE(j["tokens_match_single_process"].is_null());
  const json& p = j["per_rank"][3];
  EXPECT_EQ(p["rank"], 3);
  EXPECT_EQ(p["graph_keys"], json({"bbbbprompt0123456789abcdef", "bbbbdecode0123456789abcdef"}));
  EXPECT_EQ(p["hit"], false);
  EXPECT_DOUBLE_EQ(p["compile_s"].get<double>(), 4.0);
  EXPECT_EQ(p["peak_rss_bytes"], 13 << 20);
  const json& m = p["methods"][0];
  for (const char* k : {"method",
                        "graph_key",
                        "hit",
                        "compiled",
                        "fetched",
                        "read_store",
                        "remote",
                        "remote_bytes",
                        "owner",
                        "trace_s",
                        "compile_s",
                        "compile_cpu_s",
                        "exchange_s",
                        "persist_s",
                        "total_s",
                        "bytes_received",
                        "artifact_bytes",
                        "writer",
                        "pass_times_s",
                        "kernels_tuned",
                        "kernels_reused",
                        "steps",
                        "all_hit",
                        "hosts",
                        "key_bytes",
                        "bytes_between_hosts",
                        "flat_bytes_between_hosts",
                        "entries_written",
                        "started_at",
                        "ended_at"})
    EXPECT_TRUE(m.contains(k)) << k;
  EXPECT_EQ(m["method"], "prompt");
  EXPECT_EQ(m["owner"], 2);
  EXPECT_DOUBLE_EQ(m["pass_times_s"]["autotune"].get<double>(), 0.3);
  for (const auto& name : kStepNames) EXPECT_TRUE(m["steps"].contains(std::string(name))) << name;
  // A warmup has no generation fields.
  r.generation.reset();
  EXPECT_FALSE(json(r).contains("tokens"));
  EXPECT_FALSE(json(r).contains("tokens_match_single_process"));
}

TEST(JobReport, RankReportsRoundTripThroughTheExchange) {
  std::vector<RankReport> ranks = four_ranks();
  ranks[1].methods[1].steps.reset();  // an independent method
  ranks[1].methods[1].report.reason = "stale (runtime_version: stored '1.0.0', now '1.1.0')";
  ranks[1].methods[1].report.artifact_checksum = "0123abcd";
  ranks[1].methods[1].report.saved = true;
  ranks[1].methods[0].report.warm = {0.25, 0.125, 0.0625, 0.5, 0.375, 0.75, 1.5, 2.0};
  const std::string wire = json(ranks[1]).dump();
  const RankReport back = json::parse(wire).get<RankReport>();
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.peak_rss_bytes, 11u << 20);
  EXPECT_EQ(back.captures.recorded, 1u);
  ASSERT_EQ(back.methods.size(), 2u);
  ASSERT_TRUE(back.methods[0].steps);
  EXPECT_FALSE(back.methods[1].steps);
  EXPECT_EQ(back.methods[0].steps->method, "prompt");
  EXPECT_EQ(step_times(*back.methods[0].steps), step_times(*ranks[1].methods[0].steps));
  EXPECT_DOUBLE_EQ(back.methods[0].steps->ended_at, 103.0);
  EXPECT_EQ(back.methods[0].steps->bytes_between_hosts, 400u);
  EXPECT_TRUE(back.methods[0].report.remote);
  EXPECT_EQ(back.methods[0].report.remote_bytes, 777u);
  EXPECT_EQ(back.methods[1].report.reason, "stale (runtime_version: stored '1.0.0', now '1.1.0')");
  EXPECT_EQ(back.methods[1].report.artifact_checksum, "0123abcd");
  EXPECT_TRUE(back.methods[1].report.saved);
  EXPECT_EQ(back.methods[0].report.pass_times_s.size(), 3u);
  const WarmPhases& w = back.methods[0].report.warm;  // where the warm start's time went
  EXPECT_EQ(json::parse(wire)["methods"][0]["warm_phases"]["decode_s"], 0.5);
  EXPECT_DOUBLE_EQ(w.trace_s, 0.25);
  EXPECT_DOUBLE_EQ(w.key_s, 0.125);
  EXPECT_DOUBLE_EQ(w.read_s, 0.0625);
  EXPECT_DOUBLE_EQ(w.decode_s, 0.5);
  EXPECT_DOUBLE_EQ(w.own_key_s, 0.375);
  EXPECT_DOUBLE_EQ(w.bind_s, 0.75);
  EXPECT_DOUBLE_EQ(w.first_run_s, 1.5);
  EXPECT_DOUBLE_EQ(w.ready_s, 2.0);
  EXPECT_EQ(json(back), json(ranks[1]));
}

TEST(JobReport, FileRoundTripsAndReassemblesToTheSameTotals) {
  JobReport r = assemble_job_report(job_info(4), four_ranks());
  r.generation = GenerationReport{0.5, 0.002, 0.001, {5, 6}, true};
  const std::string text = json(r).dump(2);
  const JobReport back = json::parse(text).get<JobReport>();
  EXPECT_EQ(json(back), json(r));
  EXPECT_EQ(back.job.hidden, 64);
  EXPECT_EQ(back.compiled, 4);
  EXPECT_EQ(back.subgraphs.size(), 4u);
  ASSERT_TRUE(back.generation);
  EXPECT_EQ(back.generation->tokens_match_single_process, std::optional<bool>(true));
  // The per-rank reports read back assemble to the same totals.
  JobReport without_generation = r;
  without_generation.generation.reset();
  EXPECT_EQ(json(assemble_job_report(back.job, back.per_rank)), json(without_generation));
}

// 1,000 tokens of a 152,064-word vocabulary (ctest report_json runs that
// job), then 200,000 tokens, a long graph key and 512 ranks: nothing is cut.
TEST(JobReport, HugeReportsAreWholeJson) {
  for (std::size_t n : {std::size_t{1000}, std::size_t{200000}}) {
    SCOPED_TRACE(n);
    std::vector<RankReport> ranks(512);
    for (int i = 0; i < 512; ++i) {
      ranks[i].rank = i;
      ranks[i].methods.push_back(
          coordinated("prompt", std::string(4096, static_cast<char>('a' + i % 26)) + std::to_string(i), 1, 0));
      ranks[i].methods[0].report.compiled = true;
    }
    JobReport r = assemble_job_report(job_info(512), ranks);
    GenerationReport g;
    for (std::size_t t = 0; t < n; ++t) g.tokens.push_back(static_cast<std::int64_t>(152063 - t % 152064));
    g.tokens_match_single_process = false;
    r.generation = g;
    const std::string text = json(r).dump(2);
    const json j = json::parse(text);
    ASSERT_EQ(j["tokens"].size(), n);
    EXPECT_EQ(j["tokens"][0], 152063);
    EXPECT_EQ(j["tokens"][n - 1].get<std::int64_t>(), g.tokens.back());
    EXPECT_EQ(j["tokens_match_single_process"], false);
    EXPECT_EQ(j["per_rank"].size(), 512u);
    EXPECT_EQ(j["unique_subgraphs"], 512);
    EXPECT_EQ(j["per_rank"][511]["graph_keys"][0].get<std::string>().size(), 4096u + 3);
    const JobReport back = j.get<JobReport>();
    EXPECT_EQ(back.generation->tokens, g.tokens);
    EXPECT_EQ(back.subgraphs[511].compiled_by.size(), 1u);
  }
}

TEST(JobReport, AFileLackingAFieldIsAnErrorNamingIt) {
  json j = assemble_job_report(job_info(4), four_ranks());
  j.erase("world_size");
  try {
    (void)j.get<JobReport>();
    FAIL() << "a report without world_size was read";
  } catch (const json::exception& e) {
    EXPECT_NE(std::string(e.what()).find("world_size"), std::string::npos) << e.what();
  }
}

// Every rank-method by where its program came from: its own entry, the
// remote tier, the store's object of another layout, another rank, a
// compile; warm counts all but compiles and what was received from one.
// Each rank's process counters travel with its report and are summed.
TEST(JobReport, RankMethodsAreSplitByWhereTheirProgramCameFrom) {
  std::vector<RankReport> ranks = four_ranks();  // 0 and 2 compile, 1 and 3 receive
  ranks[1].methods[0].report = {};               // rank 1's prompt: its own entry
  ranks[1].methods[0].report.method = "prompt";
  ranks[1].methods[0].report.graph_key = ranks[0].methods[0].report.graph_key;
  ranks[1].methods[0].report.hit = true;
  ranks[0].methods[1].report.compiled = false;  // rank 0's decode: the store's object
  ranks[0].methods[1].report.read_store = true;
  for (RankMethod& m : ranks[2].methods) {  // stage 2: the remote tier, rank 3 receives
    m.report.compiled = false;
    m.report.remote = m.report.read_store = true;
  }
  for (RankReport& r : ranks) r.counters.hits_remote = static_cast<std::uint64_t>(r.rank);
  ranks[3].counters.misses_by_cause["absent"] = 2;
  const JobReport r = assemble_job_report(job_info(4), ranks);
  EXPECT_EQ(r.loaded, 1);
  EXPECT_EQ(r.hit_remote, 2);
  EXPECT_EQ(r.reused_other_layout, 1);
  EXPECT_EQ(r.received, 3);
  EXPECT_EQ(r.compiled, 1);
  EXPECT_EQ(r.loaded + r.hit_remote + r.reused_other_layout + r.received + r.compiled,
            static_cast<int>(r.rank_methods()));
  EXPECT_EQ(r.warm, 7);  // all but rank 0's compiled prompt
  EXPECT_EQ(r.counters.hits_remote, 0u + 1u + 2u + 3u);
  EXPECT_EQ(r.counters.misses_by_cause.at("absent"), 2u);
  const json j = r;
  EXPECT_EQ(j["schema_version"], kJobReportSchemaVersion);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["hit_local"], 1);
  EXPECT_EQ(j["hit_remote"], 2);
  EXPECT_EQ(j["reused_other_layout"], 1);
  EXPECT_EQ(j["received"], 3);
  EXPECT_EQ(j["compiled"], 1);
  EXPECT_EQ(j["warm"], 7);
  EXPECT_EQ(j["loaded"], 1);  // the field of every earlier version, kept
  EXPECT_EQ(j["per_rank"][0]["methods"][0]["served_from"], "compiled");
  EXPECT_EQ(j["per_rank"][0]["methods"][1]["served_from"], "reused_other_layout");
  EXPECT_EQ(j["per_rank"][1]["methods"][0]["served_from"], "hit_local");
  EXPECT_EQ(j["per_rank"][1]["methods"][1]["served_from"], "received");
  EXPECT_EQ(j["per_rank"][2]["methods"][0]["served_from"], "hit_remote");
  EXPECT_EQ(j["per_rank"][3]["counters"]["hits_remote"], 3);
  const JobReport back = j.get<JobReport>();
  EXPECT_EQ(back.hit_remote, 2);
  EXPECT_EQ(back.reused_other_layout, 1);
  EXPECT_EQ(back.received, 3);
  EXPECT_EQ(back.warm, 7);
  EXPECT_EQ(back.per_rank[3].counters.hits_remote, 3u);
  EXPECT_EQ(back.per_rank[3].counters.misses_by_cause.at("absent"), 2u);
}

}  // namespace
