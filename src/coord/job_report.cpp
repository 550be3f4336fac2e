#include "coord/job_report.h"

#include "cache/source.h"
#include "mpi/comm.h"
#include "process/context.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <utility>

namespace npucache::coord {

namespace {

using json = nlohmann::json;

// The StepReport member of each step of kStepNames, in that order.
constexpr std::array<double dist::StepReport::*, kStepNames.size()> kStepMembers = {
    &dist::StepReport::setup_s,   &dist::StepReport::lookup_s,  &dist::StepReport::arrival_s,
    &dist::StepReport::keys_s,    &dist::StepReport::plan_s,    &dist::StepReport::remote_s,
    &dist::StepReport::produce_s, &dist::StepReport::status_s,  &dist::StepReport::exchange_s,
    &dist::StepReport::load_s,    &dist::StepReport::persist_s, &dist::StepReport::save_s};

json steps_json(const StepTimes& t) {
  json j = json::object();
  for (std::size_t i = 0; i < kStepNames.size(); ++i) j[std::string(kStepNames[i])] = t[i];
  return j;
}

StepTimes steps_from_json(const json& j) {
  StepTimes t{};
  for (std::size_t i = 0; i < kStepNames.size(); ++i) t[i] = j.at(std::string(kStepNames[i])).get<double>();
  return t;
}

// `j[key]` when present, else `fallback`: for the fields a report written
// before them lacks.
template <class T>
T value_or(const json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

// The process's peak resident memory (VmHWM of /proc/self/status), 0 when
// unknown.
std::size_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<std::size_t>(std::stoull(line.substr(6))) * 1024;
  return 0;
}

// The phases of a warm start (WarmPhases), by name: the keys of a method's
// `warm_phases` in the JSON.
constexpr std::array<std::pair<const char*, double WarmPhases::*>, 8> kWarmPhases = {{
    {"trace_s", &WarmPhases::trace_s},
    {"key_s", &WarmPhases::key_s},
    {"read_s", &WarmPhases::read_s},
    {"decode_s", &WarmPhases::decode_s},
    {"own_key_s", &WarmPhases::own_key_s},
    {"bind_s", &WarmPhases::bind_s},
    {"first_run_s", &WarmPhases::first_run_s},
    {"ready_s", &WarmPhases::ready_s},
}};

json warm_json(const WarmPhases& w) {
  json j = json::object();
  for (const auto& [name, member] : kWarmPhases) j[name] = w.*member;
  return j;
}

// A report written before the phases has none: zeros.
WarmPhases warm_from_json(const json& j) {
  WarmPhases w;
  for (const auto& [name, member] : kWarmPhases) w.*member = value_or<double>(j, name, 0.0);
  return w;
}

json captures_json(const Captures& c) {
  return {{"recorded", c.recorded}, {"restored", c.restored}, {"recaptured", c.recaptured}};
}

Captures captures_from_json(const json& j) {
  return {j.at("recorded").get<std::size_t>(), j.at("restored").get<std::size_t>(),
          j.at("recaptured").get<std::size_t>()};
}

}  // namespace

StepTimes step_times(const dist::StepReport& s) {
  StepTimes t{};
  for (std::size_t i = 0; i < kStepMembers.size(); ++i) t[i] = s.*kStepMembers[i];
  return t;
}

std::vector<std::string> RankReport::graph_keys() const {
  std::vector<std::string> keys;
  keys.reserve(methods.size());
  for (const auto& m : methods) keys.push_back(m.report.graph_key);
  return keys;
}

bool RankReport::hit() const {
  return std::all_of(methods.begin(), methods.end(), [](const RankMethod& m) { return m.report.hit; });
}

double RankReport::compile_s() const {
  double s = 0;
  for (const auto& m : methods) s += m.report.compile_s;
  return s;
}

double RankReport::compile_cpu_s() const {
  double s = 0;
  for (const auto& m : methods) s += m.report.compile_cpu_s;
  return s;
}

void LaterCalls::add(const LaterCalls& o) {
  compiled += o.compiled;
  loaded += o.loaded;
  waited_then_compiled += o.waited_then_compiled;
  stored += o.stored;
  max_wait_s = std::max(max_wait_s, o.max_wait_s);
}

namespace {

json later_json(const LaterCalls& l) {
  return {{"compiled", l.compiled},
          {"loaded", l.loaded},
          {"waited_then_compiled", l.waited_then_compiled},
          {"stored", l.stored},
          {"max_wait_s", l.max_wait_s}};
}

LaterCalls later_from_json(const json& j) {
  LaterCalls l;
  j.at("compiled").get_to(l.compiled);
  j.at("loaded").get_to(l.loaded);
  j.at("waited_then_compiled").get_to(l.waited_then_compiled);
  j.at("stored").get_to(l.stored);
  j.at("max_wait_s").get_to(l.max_wait_s);
  return l;
}

}  // namespace

RankReport local_rank_report(int rank, const Captures& captures) {
  RankReport r;
  r.rank = rank;
  r.host = process::Context::current().identity().host;
  r.peak_rss_bytes = peak_rss_bytes();
  r.captures = captures;
  r.counters = storage::process_counters();
  const auto steps = dist::step_reports();
  std::size_t next_step = 0;
  for (const auto& m : dist::reports()) {
    if (!m.later.empty()) {  // a later call's record: counted, not a rank-method of the job's table
      r.later.compiled += m.later == "compiled";
      r.later.loaded += m.later == "loaded";
      r.later.waited_then_compiled += m.later == "waited_then_compiled";
      r.later.stored += m.later == "stored";
      r.later.max_wait_s = std::max(r.later.max_wait_s, m.later_wait_s);
      continue;
    }
    // Step reports exist for coordinated methods only, in the same order.
    RankMethod rm{m, std::nullopt};
    if (next_step < steps.size() && steps[next_step].method == m.method) rm.steps = steps[next_step++];
    r.methods.push_back(std::move(rm));
  }
  return r;
}

std::size_t JobReport::rank_methods() const {
  std::size_t n = 0;
  for (const auto& r : per_rank) n += r.methods.size();
  return n;
}

JobReport assemble_job_report(const JobInfo& job, std::vector<RankReport> ranks) {
  JobReport j;
  j.job = job;
  std::set<std::string> keys;
  std::map<std::string, Subgraph> subgraphs;
  std::map<std::string, std::size_t> step_row;  // method -> index in method_steps
  std::set<std::string> host_names;
  for (const RankReport& r : ranks) {
    if (!r.host.empty()) host_names.insert(r.host);
    j.max_peak_rss_bytes = std::max(j.max_peak_rss_bytes, r.peak_rss_bytes);
    j.captures.recorded += r.captures.recorded;
    j.captures.restored += r.captures.restored;
    j.captures.recaptured += r.captures.recaptured;
    j.later.add(r.later);
    storage::add_counters(j.counters, r.counters);
    for (const RankMethod& rm : r.methods) {
      const MethodReport& m = rm.report;
      keys.insert(m.graph_key);
      Subgraph& sub = subgraphs[m.graph_key];
      sub.graph_key = m.graph_key;
      if (m.compiled) {
        sub.compiled_by.push_back(r.rank);
        sub.compile_cpu_s += m.compile_cpu_s;
      }
      const std::string_view from = cache::served_from(m);
      j.compiled += from == "compiled";
      j.loaded += from == "hit_local";
      j.hit_remote += from == "hit_remote";
      j.reused_other_layout += from == "reused_other_layout";
      j.received += from == "received";
      if (!m.hit && !m.reason.empty()) ++j.misses[m.cause.empty() ? m.reason : m.cause];
      j.fetched += m.fetched;
      j.remote_reads += m.remote;
      j.remote_bytes_read += m.remote_bytes;
      j.writers += m.writer;
      j.kernels_tuned += m.kernels_tuned;
      j.kernels_reused += m.kernels_reused;
      j.regions_compiled += m.regions_compiled;
      j.regions_reused += m.regions_reused;
      j.regions_waited += m.regions_waited;
      j.regions_copied += m.regions_copied;
      j.compile_cpu_s += m.compile_cpu_s;
      j.exchange_s = std::max(j.exchange_s, m.exchange_s);
      j.persist_s = std::max(j.persist_s, m.persist_s);
      j.bytes_exchanged += m.bytes_received;
      if (!rm.steps) continue;
      const dist::StepReport& s = *rm.steps;
      j.bytes_between_hosts += s.bytes_between_hosts;
      j.flat_bytes_between_hosts += s.flat_bytes_between_hosts;
      j.entries_written += s.entries_written;
      j.hosts = std::max(j.hosts, s.hosts);
      const StepTimes t = step_times(s);
      const auto [it, fresh] = step_row.try_emplace(m.method, j.method_steps.size());
      if (fresh) {
        j.method_steps.push_back({m.method, t, t, s.started_at, s.ended_at});
        continue;
      }
      MethodSteps& row = j.method_steps[it->second];
      for (std::size_t i = 0; i < t.size(); ++i) {
        row.max_s[i] = std::max(row.max_s[i], t[i]);
        row.min_s[i] = std::min(row.min_s[i], t[i]);
      }
      row.last_start = std::max(row.last_start, s.started_at);
      row.last_end = std::max(row.last_end, s.ended_at);
    }
  }
  for (const MethodSteps& row : j.method_steps) {
    for (std::size_t i = 0; i < row.max_s.size(); ++i) {
      j.steps_s[i] += row.max_s[i];
      j.steps_min_s[i] += row.min_s[i];
    }
    j.coordination_s += row.coordination_s();
  }
  for (const RankReport& r : ranks)
    for (const RankMethod& rm : r.methods) {
      const std::string_view from = cache::served_from(rm.report);
      j.warm += from != "compiled" && (from != "received" || subgraphs[rm.report.graph_key].compiled_by.empty());
    }
  j.hosts = std::max(j.hosts, static_cast<int>(host_names.size()));
  j.unique_subgraphs = keys.size();
  for (auto& [key, sub] : subgraphs) {
    std::sort(sub.compiled_by.begin(), sub.compiled_by.end());
    j.subgraphs.push_back(std::move(sub));
  }
  j.per_rank = std::move(ranks);
  return j;
}

std::optional<JobReport> gather_job_report(const JobInfo& job, const RankReport& mine, double timeout_s) {
  const mpi::Comm world = mpi::Comm::world();
  const auto all = world.gather(json(mine).dump(), 0, {"job report: gathering every rank's report", timeout_s});
  if (world.rank() != 0) return std::nullopt;
  std::vector<RankReport> ranks(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    ranks[r] = json::parse(all[r]).get<RankReport>();
    ranks[r].rank = static_cast<int>(r);
  }
  return assemble_job_report(job, std::move(ranks));
}

// --- JSON -------------------------------------------------------------------

void to_json(json& j, const RankMethod& rm) {
  const MethodReport& r = rm.report;
  json pass_times = json::object();  // of this rank's compile, when it compiled
  for (const auto& [pass, s] : r.pass_times_s) pass_times[pass] = s;
  j = {{"method", r.method},
       {"graph_key", r.graph_key},
       {"hit", r.hit},
       {"compiled", r.compiled},
       {"fetched", r.fetched},
       {"read_store", r.read_store},
       {"remote", r.remote},
       {"remote_bytes", r.remote_bytes},
       {"owner", r.owner},
       {"trace_s", r.trace_s},
       {"compile_s", r.compile_s},
       {"compile_cpu_s", r.compile_cpu_s},
       {"exchange_s", r.exchange_s},
       {"persist_s", r.persist_s},
       {"total_s", r.total_s},
       {"bytes_received", r.bytes_received},
       {"artifact_bytes", r.artifact_bytes},
       {"artifact_checksum", r.artifact_checksum},
       {"writer", r.writer},
       {"saved", r.saved},
       {"reason", r.reason},
       {"served_from", std::string(cache::served_from(r))},
       {"cause", r.cause},
       {"pass_times_s", pass_times},
       {"kernels_tuned", r.kernels_tuned},
       {"kernels_reused", r.kernels_reused},
       {"regions_compiled", r.regions_compiled},
       {"regions_reused", r.regions_reused},
       {"regions_waited", r.regions_waited},
       {"regions_copied", r.regions_copied},
       {"warm_phases", warm_json(r.warm)}};
  if (!rm.steps) return;
  const dist::StepReport& s = *rm.steps;
  j["steps"] = steps_json(step_times(s));
  j["all_hit"] = s.all_hit;
  j["hosts"] = s.hosts;
  j["key_bytes"] = s.key_bytes;
  j["bytes_between_hosts"] = s.bytes_between_hosts;
  j["flat_bytes_between_hosts"] = s.flat_bytes_between_hosts;
  j["entries_written"] = s.entries_written;
  j["started_at"] = s.started_at;
  j["ended_at"] = s.ended_at;
}

void from_json(const json& j, RankMethod& rm) {
  MethodReport& r = rm.report;
  r = MethodReport{};
  j.at("method").get_to(r.method);
  j.at("graph_key").get_to(r.graph_key);
  j.at("hit").get_to(r.hit);
  j.at("compiled").get_to(r.compiled);
  j.at("fetched").get_to(r.fetched);
  j.at("read_store").get_to(r.read_store);
  j.at("remote").get_to(r.remote);
  j.at("remote_bytes").get_to(r.remote_bytes);
  j.at("owner").get_to(r.owner);
  j.at("trace_s").get_to(r.trace_s);
  j.at("compile_s").get_to(r.compile_s);
  j.at("compile_cpu_s").get_to(r.compile_cpu_s);
  j.at("exchange_s").get_to(r.exchange_s);
  j.at("persist_s").get_to(r.persist_s);
  j.at("total_s").get_to(r.total_s);
  j.at("bytes_received").get_to(r.bytes_received);
  j.at("artifact_bytes").get_to(r.artifact_bytes);
  r.artifact_checksum = value_or<std::string>(j, "artifact_checksum", "");
  j.at("writer").get_to(r.writer);
  r.saved = value_or<bool>(j, "saved", false);
  r.reason = value_or<std::string>(j, "reason", "");
  r.cause = value_or<std::string>(j, "cause", "");
  for (const auto& [pass, s] : j.at("pass_times_s").items()) r.pass_times_s.emplace_back(pass, s.get<double>());
  j.at("kernels_tuned").get_to(r.kernels_tuned);
  j.at("kernels_reused").get_to(r.kernels_reused);
  r.regions_compiled = value_or<int>(j, "regions_compiled", 0);
  r.regions_reused = value_or<int>(j, "regions_reused", 0);
  r.regions_waited = value_or<int>(j, "regions_waited", 0);
  r.regions_copied = value_or<int>(j, "regions_copied", 0);
  if (const auto it = j.find("warm_phases"); it != j.end() && it->is_object()) r.warm = warm_from_json(*it);
  rm.steps.reset();
  if (!j.contains("steps")) return;
  dist::StepReport s;
  s.method = r.method;
  const StepTimes t = steps_from_json(j.at("steps"));
  for (std::size_t i = 0; i < kStepMembers.size(); ++i) s.*kStepMembers[i] = t[i];
  j.at("all_hit").get_to(s.all_hit);
  j.at("hosts").get_to(s.hosts);
  j.at("key_bytes").get_to(s.key_bytes);
  j.at("bytes_between_hosts").get_to(s.bytes_between_hosts);
  j.at("flat_bytes_between_hosts").get_to(s.flat_bytes_between_hosts);
  j.at("entries_written").get_to(s.entries_written);
  j.at("started_at").get_to(s.started_at);
  j.at("ended_at").get_to(s.ended_at);
  rm.steps = std::move(s);
}

void to_json(json& j, const RankReport& r) {
  j = {{"rank", r.rank},
       {"host", r.host},
       {"peak_rss_bytes", r.peak_rss_bytes},
       {"captures", captures_json(r.captures)},
       {"later_calls", later_json(r.later)},
       {"methods", r.methods},
       {"graph_keys", r.graph_keys()},
       {"hit", r.hit()},
       {"compile_s", r.compile_s()},
       {"compile_cpu_s", r.compile_cpu_s()},
       {"counters", json::parse(storage::counters_json(r.counters))}};
}

void from_json(const json& j, RankReport& r) {
  j.at("rank").get_to(r.rank);
  r.host = j.value("host", std::string());
  j.at("peak_rss_bytes").get_to(r.peak_rss_bytes);
  r.captures = j.contains("captures") ? captures_from_json(j.at("captures")) : Captures{};
  r.later = j.contains("later_calls") ? later_from_json(j.at("later_calls")) : LaterCalls{};
  j.at("methods").get_to(r.methods);
  r.counters = j.contains("counters") ? storage::counters_from_json(j.at("counters").dump()) : storage::CacheStats{};
}

void to_json(json& j, const JobReport& r) {
  const JobInfo& g = r.job;
  json method_steps = json::array();
  for (const MethodSteps& m : r.method_steps)
    method_steps.push_back({{"method", m.method},
                            {"steps_s", steps_json(m.max_s)},
                            {"steps_min_s", steps_json(m.min_s)},
                            {"started_at", m.last_start},
                            {"ended_at", m.last_end},
                            {"coordination_s", m.coordination_s()}});
  json subgraphs = json::array();
  for (const Subgraph& s : r.subgraphs)
    subgraphs.push_back(
        {{"graph_key", s.graph_key}, {"compiled_by", s.compiled_by}, {"compile_cpu_s", s.compile_cpu_s}});
  j = {{"schema_version", kJobReportSchemaVersion},
       {"model", g.model},
       {"architecture", g.architecture},
       {"layers", g.layers},
       {"hidden", g.hidden},
       {"weights", g.weights},
       {"max_peak_rss_bytes", r.max_peak_rss_bytes},
       {"world_size", g.world_size},
       {"tp", g.tp},
       {"pp", g.pp},
       {"backend", g.backend},
       {"mode", g.mode},
       {"dynamic", g.dynamic},
       {"independent", g.independent},
       {"flat_exchange", g.flat_exchange},
       {"hosts", r.hosts},
       {"unique_subgraphs", r.unique_subgraphs},
       {"compiled", r.compiled},
       {"loaded", r.loaded},
       {"fetched", r.fetched},
       {"hit_local", r.loaded},
       {"hit_remote", r.hit_remote},
       {"reused_other_layout", r.reused_other_layout},
       {"received", r.received},
       {"warm", r.warm},
       {"remote_reads", r.remote_reads},
       {"remote_bytes_read", r.remote_bytes_read},
       {"writers", r.writers},
       {"kernels_tuned", r.kernels_tuned},
       {"kernels_reused", r.kernels_reused},
       {"regions_compiled", r.regions_compiled},
       {"regions_reused", r.regions_reused},
       {"regions_waited", r.regions_waited},
       {"regions_copied", r.regions_copied},
       {"captures_recorded", r.captures.recorded},
       {"captures_restored", r.captures.restored},
       {"captures_recaptured", r.captures.recaptured},
       {"later_calls", later_json(r.later)},
       {"entries_written", r.entries_written},
       {"wall_s", g.wall_s},
       {"compile_cpu_s", r.compile_cpu_s},
       {"bytes_exchanged", r.bytes_exchanged},
       {"bytes_between_hosts", r.bytes_between_hosts},
       {"flat_bytes_between_hosts", r.flat_bytes_between_hosts},
       {"exchange_s", r.exchange_s},
       {"exchange_gbps", r.exchange_gbps()},
       {"persist_s", r.persist_s},
       {"steps_s", steps_json(r.steps_s)},
       {"steps_min_s", steps_json(r.steps_min_s)},
       {"coordination_s", r.coordination_s},
       {"method_steps", method_steps},
       {"subgraphs", subgraphs},
       {"per_rank", r.per_rank},
       {"misses", r.misses},
       {"cache_dir", g.cache_dir}};
  if (r.dry_run) j["dry_run"] = true;  // a real run's report has no such field
  if (const auto& gen = r.generation) {
    j["time_to_ready_s"] = gen->time_to_ready_s;
    j["time_to_first_token_s"] = gen->time_to_first_token_s;
    j["per_token_s"] = gen->per_token_s;
    j["tokens"] = gen->tokens;
    j["tokens_match_single_process"] =
        gen->tokens_match_single_process ? json(*gen->tokens_match_single_process) : json();
  }
}

void from_json(const json& j, JobReport& r) {
  r = JobReport{};
  JobInfo& g = r.job;
  j.at("model").get_to(g.model);
  j.at("architecture").get_to(g.architecture);
  j.at("layers").get_to(g.layers);
  g.hidden = value_or<std::int64_t>(j, "hidden", 0);
  j.at("weights").get_to(g.weights);
  j.at("max_peak_rss_bytes").get_to(r.max_peak_rss_bytes);
  j.at("world_size").get_to(g.world_size);
  j.at("tp").get_to(g.tp);
  j.at("pp").get_to(g.pp);
  j.at("backend").get_to(g.backend);
  j.at("mode").get_to(g.mode);
  j.at("dynamic").get_to(g.dynamic);
  j.at("independent").get_to(g.independent);
  j.at("flat_exchange").get_to(g.flat_exchange);
  j.at("hosts").get_to(r.hosts);
  j.at("unique_subgraphs").get_to(r.unique_subgraphs);
  j.at("compiled").get_to(r.compiled);
  j.at("loaded").get_to(r.loaded);
  j.at("fetched").get_to(r.fetched);
  r.hit_remote = value_or<int>(j, "hit_remote", 0);
  r.reused_other_layout = value_or<int>(j, "reused_other_layout", 0);
  r.received = value_or<int>(j, "received", 0);
  r.warm = value_or<int>(j, "warm", 0);
  j.at("remote_reads").get_to(r.remote_reads);
  j.at("remote_bytes_read").get_to(r.remote_bytes_read);
  j.at("writers").get_to(r.writers);
  j.at("kernels_tuned").get_to(r.kernels_tuned);
  j.at("kernels_reused").get_to(r.kernels_reused);
  r.regions_compiled = value_or<int>(j, "regions_compiled", 0);
  r.regions_reused = value_or<int>(j, "regions_reused", 0);
  r.regions_waited = value_or<int>(j, "regions_waited", 0);
  r.regions_copied = value_or<int>(j, "regions_copied", 0);
  j.at("captures_recorded").get_to(r.captures.recorded);
  j.at("captures_restored").get_to(r.captures.restored);
  j.at("captures_recaptured").get_to(r.captures.recaptured);
  r.later = j.contains("later_calls") ? later_from_json(j.at("later_calls")) : LaterCalls{};
  j.at("entries_written").get_to(r.entries_written);
  j.at("wall_s").get_to(g.wall_s);
  j.at("compile_cpu_s").get_to(r.compile_cpu_s);
  j.at("bytes_exchanged").get_to(r.bytes_exchanged);
  j.at("bytes_between_hosts").get_to(r.bytes_between_hosts);
  j.at("flat_bytes_between_hosts").get_to(r.flat_bytes_between_hosts);
  j.at("exchange_s").get_to(r.exchange_s);
  j.at("persist_s").get_to(r.persist_s);
  r.steps_s = steps_from_json(j.at("steps_s"));
  r.steps_min_s = steps_from_json(j.at("steps_min_s"));
  j.at("coordination_s").get_to(r.coordination_s);
  if (j.contains("method_steps"))
    for (const json& m : j.at("method_steps"))
      r.method_steps.push_back({m.at("method").get<std::string>(), steps_from_json(m.at("steps_s")),
                                steps_from_json(m.at("steps_min_s")), m.at("started_at").get<double>(),
                                m.at("ended_at").get<double>()});
  if (j.contains("subgraphs"))
    for (const json& s : j.at("subgraphs"))
      r.subgraphs.push_back({s.at("graph_key").get<std::string>(), s.at("compiled_by").get<std::vector<int>>(),
                             s.at("compile_cpu_s").get<double>()});
  j.at("per_rank").get_to(r.per_rank);
  r.dry_run = j.value("dry_run", false);
  if (const auto it = j.find("misses"); it != j.end() && it->is_object()) it->get_to(r.misses);
  g.cache_dir = value_or<std::string>(j, "cache_dir", "");
  if (j.contains("tokens")) {
    GenerationReport gen;
    j.at("time_to_ready_s").get_to(gen.time_to_ready_s);
    j.at("time_to_first_token_s").get_to(gen.time_to_first_token_s);
    j.at("per_token_s").get_to(gen.per_token_s);
    j.at("tokens").get_to(gen.tokens);
    if (const auto it = j.find("tokens_match_single_process"); it != j.end() && !it->is_null())
      gen.tokens_match_single_process = it->get<bool>();
    r.generation = std::move(gen);
  }
}

}  // namespace npucache::coord
