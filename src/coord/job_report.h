// The job report of a multi-rank job (npucache warmup, infer): what every
// rank's coordinated methods did (its MethodReports and StepReports, from
// the registry of reports.h), gathered at rank 0 and summed over the ranks.
// The command line prints it as a table and writes it as JSON
// (--report-json); the JSON field names are the report's format, read by
// tests, perf/ and users' scripts (docs/GUIDE.md, "The job report").
//
// Every field is typed and every string is a std::string: nothing in a
// report is bounded by a buffer (a 1,000-token generation over a
// 152,064-word vocabulary, hundreds of ranks, any graph key or method name).
#pragma once

#include <npucache/cache.h>
#include <npucache/coordinator.h>

#include "storage/stats.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::coord {

// The version of the report's JSON (its `schema_version`): raised when a
// field changes meaning or goes; fields are added without raising it.
// 2: the split of rank-methods by where their program came from.
inline constexpr int kJobReportSchemaVersion = 2;

// The coordinator's steps, in the order of docs/SCALING.md: the keys of
// `steps`, `steps_s` and `steps_min_s` in the JSON.
inline constexpr std::array<std::string_view, 12> kStepNames = {
    "setup", "lookup", "arrival", "keys", "plan", "remote", "produce", "status", "exchange", "load", "persist", "save"};
// Seconds of each step, in the order of kStepNames.
using StepTimes = std::array<double, kStepNames.size()>;
// The step times of one method's StepReport.
StepTimes step_times(const dist::StepReport& s);

// One method on one rank: its MethodReport, and the coordinator's steps
// when the method was coordinated (an independent method has none).
struct RankMethod {
  MethodReport report;
  std::optional<dist::StepReport> steps;
};

// Reduce-overhead captures of a rank's methods (CompiledMethod::status()):
// recorded here, restored from stored templates, stored templates not usable.
struct Captures {
  std::size_t recorded = 0, restored = 0, recaptured = 0;
};

// Later calls of coordinated methods that needed a new graph (automatic
// dynamic after the first call; MethodReport::later): how each was served,
// and the longest wait for another rank's compile.
struct LaterCalls {
  int compiled = 0, loaded = 0, waited_then_compiled = 0, stored = 0;
  double max_wait_s = 0;
  int total() const { return compiled + loaded + waited_then_compiled + stored; }
  void add(const LaterCalls& o);
};

// What one rank did: the unit every rank sends to rank 0.
struct RankReport {
  int rank = 0;
  std::string host;                // the process's host name
  std::size_t peak_rss_bytes = 0;  // the process's VmHWM
  Captures captures;
  std::vector<RankMethod> methods;  // in call order (first calls)
  LaterCalls later;                 // this rank's later calls
  // The process's cache counters (storage::process_counters()): the job's
  // metrics are their sum over ranks.
  storage::CacheStats counters;

  // Derived from `methods` (written to the JSON, not read back):
  std::vector<std::string> graph_keys() const;
  bool hit() const;              // every method hit this rank's own entry
  double compile_s() const;      // elapsed compile seconds, summed over methods
  double compile_cpu_s() const;  // compile CPU seconds, summed over methods
};

// This process's report: the registry's MethodReports paired with their
// StepReports (coordinated methods only, in the same order), this
// process's peak resident memory, and `captures`.
RankReport local_rank_report(int rank, const Captures& captures);

// The job's settings, as the command gave them (they are the same on
// every rank: the job identity handshake checked it).
struct JobInfo {
  std::string model, architecture;
  std::int64_t layers = 0, hidden = 0;
  std::string weights;  // "meta" (warmup) or "deterministic" (infer)
  int world_size = 1, tp = 1, pp = 1;
  std::string backend, mode, dynamic;
  bool independent = false, flat_exchange = false;
  double wall_s = 0;      // start of the cache work to every rank ready
  std::string cache_dir;  // the job's cache directory, as given (empty: the default)
};

// What a generating job (infer) produced, at rank 0.
struct GenerationReport {
  double time_to_ready_s = 0, time_to_first_token_s = 0, per_token_s = 0;
  std::vector<std::int64_t> tokens;
  // Whether the tokens equal a single-process eager run's; none when the
  // unsharded model does not fit one device (JSON null).
  std::optional<bool> tokens_match_single_process;
};

// One method's steps over the ranks: the slowest and the fastest rank's
// time of each step (for a collective, the last rank to arrive waits
// least, so the fastest rank's time is the collective's own), and the
// coordinator's own time: from the moment the last rank began the method to
// the moment the last rank finished it.
struct MethodSteps {
  std::string method;
  StepTimes max_s{}, min_s{};
  double last_start = 0, last_end = 0;  // on the machine's monotonic clock
  double coordination_s() const { return last_end - last_start; }
};

// One graph key of the job and the ranks that compiled it.
struct Subgraph {
  std::string graph_key;
  std::vector<int> compiled_by;  // ascending
  double compile_cpu_s = 0;      // of those compiles, summed
};

// The job report: the job's settings, the totals over ranks and every
// rank's report.
struct JobReport {
  JobInfo job;
  int hosts = 1;  // the ranks' distinct host names, or the most any coordinated method saw
  std::size_t unique_subgraphs = 0;
  // Rank-methods that compiled, hit their own entry, received the artifact
  // from another rank, read it from the remote tier; (rank, method) index
  // writes and the entries they wrote.
  int compiled = 0, loaded = 0, fetched = 0, remote_reads = 0, writers = 0, entries_written = 0;
  // Every rank-method by where its program came from (cache::served_from):
  // hit_local (= loaded), hit_remote, reused_other_layout, received,
  // compiled (= compiled); they sum to rank_methods().
  int hit_remote = 0, reused_other_layout = 0, received = 0;
  // Rank-methods served without a compile of this job: every source but
  // compiled, less those received from a rank that compiled the program.
  int warm = 0;
  std::size_t remote_bytes_read = 0;
  int kernels_tuned = 0, kernels_reused = 0;
  // Compile regions of the methods compiled (MethodReport::regions_*),
  // summed over ranks: compiled by a rank, taken compiled from the store.
  int regions_compiled = 0, regions_reused = 0, regions_waited = 0;
  // Region files written into stores that were compiled on another store
  // of the job (MethodReport::regions_copied), summed over ranks.
  int regions_copied = 0;
  Captures captures;                    // summed over ranks
  LaterCalls later;                     // summed over ranks (the longest wait of any)
  storage::CacheStats counters;         // every rank's process counters, summed
  std::size_t max_peak_rss_bytes = 0;   // the largest of any rank
  double compile_cpu_s = 0;             // summed over ranks
  std::size_t bytes_exchanged = 0;      // artifact bytes received, summed over ranks
  std::size_t bytes_between_hosts = 0;  // of which from another host
  std::size_t flat_bytes_between_hosts = 0;
  double exchange_s = 0, persist_s = 0;  // the longest of any rank-method
  // Each step summed over methods: the slowest rank's (steps_s), the
  // fastest rank's (steps_min_s); coordination_s summed over methods.
  StepTimes steps_s{}, steps_min_s{};
  double coordination_s = 0;
  std::vector<MethodSteps> method_steps;  // coordinated methods, in first-call order
  std::vector<Subgraph> subgraphs;        // by graph key
  std::vector<RankReport> per_rank;       // by rank
  std::optional<GenerationReport> generation;
  // A dry run (--dry-run): every outcome above is predicted, none happened.
  bool dry_run = false;
  // The rank-methods whose own entry missed, by cause (MethodReport::cause),
  // summed over ranks.
  std::map<std::string, int> misses;

  double exchange_gbps() const {
    return exchange_s > 0 ? static_cast<double>(bytes_exchanged) / exchange_s / 1e9 : 0.0;
  }
  std::size_t rank_methods() const;  // methods summed over ranks
};

// The report of the job `job` whose ranks reported `ranks` (rank i at
// index i): the totals over ranks, the steps, the subgraphs.
JobReport assemble_job_report(const JobInfo& job, std::vector<RankReport> ranks);

// Gathers every rank's `mine` at rank 0 of MPI_COMM_WORLD (bounded by
// `timeout_s`) and assembles the report there; other ranks get none.
std::optional<JobReport> gather_job_report(const JobInfo& job, const RankReport& mine, double timeout_s);

// JSON: the per-rank exchange and the --report-json file. from_json throws
// nlohmann::json's exceptions on a missing or mistyped field.
void to_json(nlohmann::json& j, const RankMethod& m);
void from_json(const nlohmann::json& j, RankMethod& m);
void to_json(nlohmann::json& j, const RankReport& r);
void from_json(const nlohmann::json& j, RankReport& r);
void to_json(nlohmann::json& j, const JobReport& r);
void from_json(const nlohmann::json& j, JobReport& r);

}  // namespace npucache::coord
