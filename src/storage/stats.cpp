#include "storage/stats.h"

#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "log/log.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "process/env.h"
#include "process/once.h"
#include "storage/dir.h"
#include "storage/metrics.h"
#include "storage/store.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>

namespace npucache::storage {
namespace fs = std::filesystem;
namespace {

double now() { return process::Context::current().env().wall_s(); }

// 16 MiB: stats.json holds counters, a last-use time per entry and
// kKeptMisses misses; anything larger is not ours.
constexpr std::size_t kMaxStatsBytes = std::size_t{16} << 20;

// The counters, last uses and misses of a stats.json document: damaged or
// foreign values are skipped, never trusted or thrown.
CacheStats from_doc(const nlohmann::json& j) {
  CacheStats s;
  auto count = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
  };
  auto text = [](const nlohmann::json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  s.hits = count("hits");
  s.misses = count("misses");
  s.saves = count("saves");
  s.captures = count("captures");
  s.restores = count("restores");
  s.recaptures = count("recaptures");
  s.region_hits = count("region_hits");
  s.region_compiles = count("region_compiles");
  s.region_copies = count("region_copies");
  s.hits_remote = count("hits_remote");
  s.hits_other_layout = count("hits_other_layout");
  s.hits_rank = count("hits_rank");
  s.compiles = count("compiles");
  if (auto mc = j.find("misses_by_cause"); mc != j.end() && mc->is_object())
    for (auto& [k, v] : mc->items())
      if (v.is_number_unsigned()) s.misses_by_cause[k] = v.get<uint64_t>();
  if (auto rc = j.find("recaptures_by_reason"); rc != j.end() && rc->is_object())
    for (auto& [k, v] : rc->items())
      if (v.is_number_unsigned() && k.size() <= 32 && s.recaptures_by_reason.size() < 64)
        s.recaptures_by_reason[k] = v.get<uint64_t>();
  if (auto t = j.find("compile_time_saved_s"); t != j.end() && t->is_number() && t->get<double>() >= 0)
    s.compile_time_saved_s = t->get<double>();
  if (auto lu = j.find("last_used"); lu != j.end() && lu->is_object())
    for (auto& [k, v] : lu->items())
      if (v.is_number()) s.last_used[k] = v.get<double>();
  if (auto rc = j.find("remote"); rc != j.end() && rc->is_object()) {
    RemoteCounters& r = s.remote;
    auto n = [&](const char* k) {
      auto it = rc->find(k);
      return it != rc->end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
    };
    r.hits = n("hits");
    r.misses = n("misses");
    r.writes = n("writes");
    r.bytes_read = n("bytes_read");
    r.bytes_written = n("bytes_written");
    if (auto t = rc->find("time_s"); t != rc->end() && t->is_number() && t->get<double>() >= 0)
      r.time_s = t->get<double>();
    if (auto e = rc->find("errors"); e != rc->end() && e->is_object())
      for (auto& [k, v] : e->items())
        if (v.is_number_unsigned()) r.errors[k] = v.get<uint64_t>();
    if (auto sh = rc->find("shards"); sh != rc->end() && sh->is_object())
      for (auto& [shard, kinds] : sh->items())
        if (kinds.is_object())
          for (auto& [k, v] : kinds.items())
            if (v.is_number_unsigned()) r.shards[shard][k] = v.get<uint64_t>();
  }
  if (auto rm = j.find("recent_misses"); rm != j.end() && rm->is_array())
    for (auto& m : *rm) {
      if (!m.is_object()) continue;
      MissRecord r;
      if (auto t = m.find("time"); t != m.end() && t->is_number()) r.time = t->get<double>();
      r.entry = text(m, "entry");
      r.reason = text(m, "reason");
      r.job = text(m, "job");
      if (auto d = m.find("differences"); d != m.end() && d->is_array())
        for (auto& x : *d)
          if (x.is_string()) r.differences.push_back(x.get<std::string>());
      s.recent_misses.push_back(std::move(r));
    }
  return s;
}

// The stats.json document of `s`.
nlohmann::json to_doc(const CacheStats& s) {
  nlohmann::json j;
  j["hits"] = s.hits;
  j["misses"] = s.misses;
  j["saves"] = s.saves;
  j["captures"] = s.captures;
  j["restores"] = s.restores;
  j["recaptures"] = s.recaptures;
  j["region_hits"] = s.region_hits;
  j["region_compiles"] = s.region_compiles;
  j["region_copies"] = s.region_copies;
  j["hits_remote"] = s.hits_remote;
  j["hits_other_layout"] = s.hits_other_layout;
  j["hits_rank"] = s.hits_rank;
  j["compiles"] = s.compiles;
  j["misses_by_cause"] = s.misses_by_cause;
  j["recaptures_by_reason"] = s.recaptures_by_reason;
  j["compile_time_saved_s"] = s.compile_time_saved_s;
  j["last_used"] = s.last_used;
  if (!s.remote.empty()) {
    j["remote"] = {
        {"hits", s.remote.hits},     {"misses", s.remote.misses},         {"writes", s.remote.writes},
        {"errors", s.remote.errors}, {"bytes_read", s.remote.bytes_read}, {"bytes_written", s.remote.bytes_written},
        {"time_s", s.remote.time_s}};
    if (!s.remote.shards.empty()) j["remote"]["shards"] = s.remote.shards;
  }
  j["recent_misses"] = nlohmann::json::array();
  for (const auto& m : s.recent_misses)
    j["recent_misses"].push_back(
        {{"time", m.time}, {"entry", m.entry}, {"reason", m.reason}, {"differences", m.differences}, {"job", m.job}});
  return j;
}

// An I/O error reading the file is thrown (an update then writes nothing:
// the counters on disk are unread, not damaged).
CacheStats parse(const Dir& dir) {
  CacheStats s;
  std::optional<std::string> text_bytes;
  try {
    text_bytes = dir.read(names::kStatsFile, kMaxStatsBytes);
  } catch (const IoError&) {
    throw;
  } catch (const CacheError& e) {
    log::warn("{}; statistics start afresh", e.what());
  }
  if (!text_bytes) return s;
  nlohmann::json j = nlohmann::json::parse(*text_bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return s;
  return from_doc(j);
}

void add_remote(RemoteCounters& into, const RemoteCounters& d) {
  into.hits += d.hits;
  into.misses += d.misses;
  into.writes += d.writes;
  for (const auto& [k, v] : d.errors) into.errors[k] += v;
  for (const auto& [shard, kinds] : d.shards)
    for (const auto& [k, v] : kinds) into.shards[shard][k] += v;
  into.bytes_read += d.bytes_read;
  into.bytes_written += d.bytes_written;
  into.time_s += d.time_s;
}

// Every counter of `d` added to `into` (not last-use times or miss records).
void sum_counters(CacheStats& into, const CacheStats& d) {
  into.hits += d.hits;
  into.misses += d.misses;
  into.saves += d.saves;
  into.captures += d.captures;
  into.restores += d.restores;
  into.recaptures += d.recaptures;
  into.region_hits += d.region_hits;
  into.region_compiles += d.region_compiles;
  into.region_copies += d.region_copies;
  into.hits_remote += d.hits_remote;
  into.hits_other_layout += d.hits_other_layout;
  into.hits_rank += d.hits_rank;
  into.compiles += d.compiles;
  for (const auto& [k, v] : d.misses_by_cause) into.misses_by_cause[k] += v;
  for (const auto& [k, v] : d.recaptures_by_reason) into.recaptures_by_reason[k] += v;
  into.compile_time_saved_s += d.compile_time_saved_s;
  add_remote(into.remote, d.remote);
}

template <class F>
void update(const fs::path& dir, F&& change) {
  try {
    if (!Dir::exists(dir)) return;
    const Store store = Store::open(dir, Create::no);
    const Dir& d = store.directory();
    FileLock lock = d.sub(names::kLocksDir, Create::yes).lock(names::kStatsLock);
    CacheStats s = parse(d);
    change(s);
    const nlohmann::json j = to_doc(s);
    d.write(names::kStatsFile, j.dump(1) + "\n");
    // Every process that used the cache ends here: damaged markers heal.
    store.heal_markers();
  } catch (const IoError& e) {
    // A full or failing disk is said once per directory; a read-only or
    // refused one was said when the cache was used.
    if (e.storage_failed() && process::Context::current().get<process::Once>().first("stats|" + dir.string()))
      log::warn("cache statistics in {} not updated ({}); this process's counters are lost", dir.string(), e.what());
    else
      log::debug("cache statistics in {} not updated: {}", dir.string(), e.what());
  } catch (const std::exception& e) {
    log::debug("cache statistics in {} not updated: {}", dir.string(), e.what());
  }
}

// Counters accumulated per cache directory until flushed: a service of the
// process context, flushed when it is destroyed (the context's shutdown,
// at exit or at the end of a scope), after the services made after it (the
// commit queue, whose commits count saves).
class Pending {
 public:
  explicit Pending(process::Context& c) {
    c.on_flush([this] { flush(); });
  }
  ~Pending() { flush(); }
  // Adds to the directory's pending counters and to the process's totals.
  template <class F>
  void add(const fs::path& dir, F&& f) {
    if (process::dry_run()) return;  // a dry run records nothing
    std::lock_guard lock(mu_);
    f(pending_[dir.string()]);
    f(totals_);
    totals_.last_used.clear();
    totals_.recent_misses.clear();
    dirs_.insert(dir.string());
  }
  CacheStats totals() {
    std::lock_guard lock(mu_);
    return totals_;
  }
  std::vector<fs::path> dirs() {
    std::lock_guard lock(mu_);
    return {dirs_.begin(), dirs_.end()};
  }
  void flush() {
    std::map<std::string, CacheStats> todo;
    {
      std::lock_guard lock(mu_);
      todo.swap(pending_);
    }
    for (auto& [dir, p] : todo)
      update(dir, [&](CacheStats& s) {
        sum_counters(s, p);
        // The later use stands: a process whose use came before another's
        // record (an earlier hit, a clock behind) does not age an entry;
        // a record ahead of now (a clock ahead) is not trusted.
        const double ahead = now() + kDateAheadSeconds;
        for (const auto& [e, t] : p.last_used) {
          double& at = s.last_used[e];
          at = at > ahead ? t : std::max(at, t);
        }
        for (auto& m : p.recent_misses) s.recent_misses.push_back(m);
        if (s.recent_misses.size() > kKeptMisses)
          s.recent_misses.erase(s.recent_misses.begin(),
                                s.recent_misses.end() - static_cast<std::ptrdiff_t>(kKeptMisses));
      });
  }

 private:
  std::mutex mu_;
  std::map<std::string, CacheStats> pending_;
  CacheStats totals_;

 public:
  std::atomic<bool> metrics_checked{false};

 private:
  std::set<std::string> dirs_;
};

Pending& pending() {
  process::Context& c = process::Context::current();
  Pending& p = c.get<Pending>();
  // The metrics file (NPUCACHE_METRICS_FILE) starts with the counters it
  // writes, after them (it is destroyed, and stops, first).
  if (!p.metrics_checked.exchange(true)) start_metrics_file(c);
  return p;
}

}  // namespace

namespace {
std::mutex job_mutex;
std::string& job_override() {
  static auto* job = new std::string;  // never destroyed: misses are recorded while the process exits
  return *job;
}
}  // namespace

void set_this_job(const std::string& job) {
  const std::lock_guard<std::mutex> lock(job_mutex);
  job_override() = job;
}

std::string this_job() {
  {
    const std::lock_guard<std::mutex> lock(job_mutex);
    if (!job_override().empty()) return job_override();
  }
  static const std::string* job = new std::string([] {
    std::string id;
    for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "SLURM_JOB_ID"})
      if (const char* v = std::getenv(name); v && *v) {
        id = v;
        if (const char* step = std::getenv("SLURM_STEP_ID"); step && *step && std::string(name) == "SLURM_JOB_ID")
          id += "." + std::string(step);
        break;
      }
    if (!id.empty()) return id;
    const process::Identity me = process::Context::current().identity();
    return me.host + ":" + std::to_string(me.pid) + ":" + std::to_string(static_cast<long long>(now()));
  }());
  return *job;
}

std::vector<MissRecord> last_job_misses(const std::vector<MissRecord>& misses) {
  if (misses.empty() || misses.back().job.empty()) {
    std::vector<MissRecord> out;  // records without jobs: the unmarked tail
    for (auto it = misses.rbegin(); it != misses.rend() && it->job.empty(); ++it) out.insert(out.begin(), *it);
    return out;
  }
  std::vector<MissRecord> out;
  for (const auto& m : misses)
    if (m.job == misses.back().job) out.push_back(m);
  return out;
}

CacheStats read_stats(const fs::path& dir) { return parse(Dir::open(dir, Safety::cache, Create::no)); }

void add_counters(CacheStats& into, const CacheStats& counters) { sum_counters(into, counters); }

std::string counters_json(const CacheStats& s) {
  CacheStats c;
  sum_counters(c, s);
  nlohmann::json j = to_doc(c);
  j.erase("last_used");
  j.erase("recent_misses");
  return j.dump();
}

CacheStats counters_from_json(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? from_doc(j) : CacheStats{};
}

CacheStats process_counters() { return pending().totals(); }

std::vector<fs::path> process_dirs() { return pending().dirs(); }

void flush_stats() { pending().flush(); }

void make_stats_counters() { (void)pending(); }

void record_hit(const fs::path& dir, const std::string& entry, double compile_seconds) {
  pending().add(dir, [&](CacheStats& s) {
    ++s.hits;
    s.compile_time_saved_s += compile_seconds;
    s.last_used[entry] = now();
  });
}

void record_miss(const fs::path& dir, const MissRecord& miss) {
  pending().add(dir, [&](CacheStats& s) {
    ++s.misses;
    ++s.misses_by_cause[miss.reason.empty() ? "unknown" : miss.reason];
    MissRecord m = miss;
    m.time = now();
    if (m.job.empty()) m.job = this_job();
    s.recent_misses.push_back(std::move(m));
  });
}

void record_remote(const fs::path& dir, const RemoteCounters& delta) {
  pending().add(dir, [&](CacheStats& s) { add_remote(s.remote, delta); });
}

void record_save(const fs::path& dir, const std::vector<std::string>& entries) {
  pending().add(dir, [&](CacheStats& s) {
    s.saves += entries.size();
    for (const auto& e : entries) s.last_used[e] = now();
  });
}

void record_written(const fs::path& dir, const std::vector<std::string>& entries) {
  pending().add(dir, [&](CacheStats& s) {
    for (const auto& e : entries) s.last_used[e] = now();
  });
}

void record_served(const fs::path& dir, Served how, double compile_seconds) {
  pending().add(dir, [&](CacheStats& s) {
    switch (how) {
      case Served::remote: ++s.hits_remote; break;
      case Served::other_layout: ++s.hits_other_layout; break;
      case Served::rank: ++s.hits_rank; break;
      case Served::compiled: ++s.compiles; return;
    }
    if (compile_seconds > 0) s.compile_time_saved_s += compile_seconds;
  });
}

void record_captures(const fs::path& dir, uint64_t captures, uint64_t restores, uint64_t recaptures,
                     const std::string& cause) {
  pending().add(dir, [&](CacheStats& s) {
    s.captures += captures;
    s.restores += restores;
    s.recaptures += recaptures;
    if (recaptures && !cause.empty()) s.recaptures_by_reason[cause] += recaptures;
  });
}

void record_regions(const fs::path& dir, uint64_t hits, uint64_t compiles, uint64_t copies) {
  pending().add(dir, [&](CacheStats& s) {
    s.region_hits += hits;
    s.region_compiles += compiles;
    s.region_copies += copies;
  });
}

void zero_stats(const fs::path& dir) {
  update(dir, [](CacheStats& s) {
    s.hits = s.misses = s.saves = 0;
    s.region_hits = s.region_compiles = s.region_copies = 0;
    s.captures = s.restores = s.recaptures = 0;
    s.recaptures_by_reason.clear();
    s.hits_remote = s.hits_other_layout = s.hits_rank = s.compiles = 0;
    s.misses_by_cause.clear();
    s.compile_time_saved_s = 0;
    s.remote = {};
    s.recent_misses.clear();
  });
}

void clear_stats(const fs::path& dir) {
  const Dir d = Dir::open(dir, Safety::cache, Create::no);
  FileLock lock = d.sub(names::kLocksDir, Create::yes).lock(names::kStatsLock);
  d.remove(names::kStatsFile);
}

void forget_entries(const fs::path& dir, const std::vector<std::string>& entries) {
  update(dir, [&](CacheStats& s) {
    for (const auto& e : entries) s.last_used.erase(e);
  });
}

}  // namespace npucache::storage
