#include "storage/metrics.h"

#include "format/cache_error.h"
#include "log/log.h"
#include "process/context.h"
#include "storage/store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace npucache::storage {
namespace fs = std::filesystem;

CacheBytes cache_bytes(const fs::path& dir) {
  CacheBytes b;
  try {
    const Store s = Store::open(dir, Create::no);
    for (const auto& key : s.object_keys()) {
      if (const auto info = s.object_stat(key)) b.stored += static_cast<uint64_t>(std::max<int64_t>(info->size, 0));
      try {
        b.raw += s.object_meta(key).raw_size;
      } catch (const CacheError&) {
      }
    }
  } catch (const std::exception& e) {
    log::debug("the size of the cache {} is unknown: {}", dir.string(), e.what());
  }
  return b;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char ch : value) {
    if (ch == '\\')
      out += "\\\\";
    else if (ch == '"')
      out += "\\\"";
    else if (ch == '\n')
      out += "\\n";
    else
      out += ch;
  }
  return out;
}

namespace {

// A sample value as the text format writes it: the shortest text that
// reads back as the same double (integers without a fraction).
std::string number(double v) {
  if (!std::isfinite(v)) return v > 0 ? "+Inf" : v < 0 ? "-Inf" : "NaN";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(double v) { out_ << name_ << ' ' << number(v) << '\n'; }
  void sample(const char* label, std::string_view value, double v) {
    out_ << name_ << '{' << label << "=\"" << escape_label_value(value) << "\"} " << number(v) << '\n';
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::string name_;
};

}  // namespace

std::string prometheus_text(const CacheStats& c, const std::optional<CacheBytes>& bytes) {
  Exposition e;
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  e.family("npucache_hits_total", "counter",
           "Programs served without compiling on this process, by source: its own entry (local), the remote "
           "tier (remote), the store's object of the same computation (other_layout), another rank (rank).");
  e.sample("source", "local", d(c.hits));
  e.sample("source", "remote", d(c.hits_remote));
  e.sample("source", "other_layout", d(c.hits_other_layout));
  e.sample("source", "rank", d(c.hits_rank));
  e.family("npucache_misses_total", "counter", "Lookups that did not find a usable entry of their own, by cause.");
  uint64_t by_cause = 0;
  for (const auto& [cause, n] : c.misses_by_cause) {
    e.sample("cause", cause, d(n));
    by_cause += n;
  }
  // Misses counted before causes were: their cause is not known.
  if (c.misses > by_cause) e.sample("cause", "unknown", d(c.misses - by_cause));
  e.family("npucache_compiles_total", "counter", "Programs compiled on a miss.");
  e.sample(d(c.compiles));
  e.family("npucache_compile_seconds_avoided_total", "counter",
           "The recorded compile time of the programs served by hits of any source.");
  e.sample(c.compile_time_saved_s);
  e.family("npucache_saves_total", "counter", "Entries written to the cache.");
  e.sample(d(c.saves));
  e.family("npucache_captures_total", "counter",
           "Reduce-overhead graph captures: recorded, restored from a stored template, recaptured (a stored "
           "template not usable).");
  e.sample("kind", "recorded", d(c.captures));
  e.sample("kind", "restored", d(c.restores));
  e.sample("kind", "recaptured", d(c.recaptures));
  e.family("npucache_remote_operations_total", "counter",
           "Calls to the remote cache tier by result: hit, miss, write, or the kind of failure.");
  e.sample("result", "hit", d(c.remote.hits));
  e.sample("result", "miss", d(c.remote.misses));
  e.sample("result", "write", d(c.remote.writes));
  for (const auto& [kind, n] : c.remote.errors) e.sample("result", kind, d(n));
  if (bytes) {
    e.family("npucache_cache_bytes", "gauge",
             "The cache's size: its object files (stored) and their artifacts uncompressed (raw).");
    e.sample("kind", "stored", d(bytes->stored));
    e.sample("kind", "raw", d(bytes->raw));
  }
  return e.text();
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kDefaultInterval = 5.0;
constexpr double kMaxInterval = 3600.0;
// The cache's size is read again at most this often (it lists the objects).
constexpr auto kBytesEvery = std::chrono::seconds(60);

double interval_from_env() {
  const char* v = std::getenv("NPUCACHE_METRICS_INTERVAL");
  if (!v || !*v) return kDefaultInterval;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end && *end == '\0' && std::isfinite(s) && s > 0 && s <= kMaxInterval) return s;
  log::warn("NPUCACHE_METRICS_INTERVAL='{}' is not a number of seconds in (0, {}]; writing the metrics file every {} s",
            v, kMaxInterval, kDefaultInterval);
  return kDefaultInterval;
}

// The rank mpiexec gave this process (Open MPI, MPICH/Hydra, Slurm), -1
// without one: seen before MPI starts and after it ends.
int launched_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return -1;
}

// The metrics file: a service of the process context, made after the
// counters it writes (so destroyed first). Its thread works in that
// context.
class MetricsFile {
 public:
  explicit MetricsFile(process::Context& c) : context_(c), path_(std::getenv("NPUCACHE_METRICS_FILE")) {
    make_stats_counters();
    interval_ = interval_from_env();
    c.on_flush([this] { write(); });
    worker_ = std::thread([this] { run(); });
  }
  ~MetricsFile() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }
  void set_job(const CacheStats& counters) {
    {
      std::lock_guard lock(mu_);
      job_ = counters;
    }
    write();
  }
  // Writes the file now (rank 0 of a job, or a process of its own).
  void write() {
    // Another rank of an MPI job never writes, also after MPI ends.
    const process::Identity who = context_.identity();
    if (who.world_size > 1 && who.world_rank != 0) other_rank_ = true;
    if (other_rank_) return;
    std::lock_guard write_lock(write_mu_);
    std::optional<CacheStats> job;
    {
      std::lock_guard lock(mu_);
      job = job_;
    }
    const CacheStats counters = job ? *job : process_counters();
    if (!bytes_ || Clock::now() - bytes_at_ >= kBytesEvery) {
      CacheBytes b;
      for (const auto& dir : process_dirs()) {
        const CacheBytes one = cache_bytes(dir);
        b.stored += one.stored;
        b.raw += one.raw;
      }
      bytes_ = b;
      bytes_at_ = Clock::now();
    }
    const std::string text = prometheus_text(counters, bytes_);
    // Beside the file and not ending in .prom (the collector reads only
    // those), then renamed over it: a scrape sees the old or the new file.
    const fs::path temp = path_.string() + "." + std::to_string(::getpid()) + ".tmp";
    try {
      {
        std::ofstream f(temp, std::ios::binary | std::ios::trunc);
        f << text;
        f.close();
        if (!f) throw std::runtime_error("could not write " + temp.string());
      }
      fs::rename(temp, path_);
    } catch (const std::exception& e) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      if (!warned_.exchange(true))
        log::warn("the metrics file NPUCACHE_METRICS_FILE={} is not written ({}); the process goes on without it",
                  path_.string(), e.what());
    }
  }

 private:
  void run() {
    const process::Context::Bind bind(context_);
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::duration<double>(interval_), [this] { return stop_; });
      if (stop_) break;
      lock.unlock();
      write();
      lock.lock();
    }
  }

  process::Context& context_;
  fs::path path_;
  double interval_ = kDefaultInterval;
  std::mutex mu_;  // stop_, job_
  std::mutex write_mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<CacheStats> job_;
  std::optional<CacheBytes> bytes_;
  Clock::time_point bytes_at_;
  std::atomic<bool> warned_{false};
  std::atomic<bool> other_rank_{launched_rank() > 0};
  std::thread worker_;
};

bool metrics_wanted() {
  const char* p = std::getenv("NPUCACHE_METRICS_FILE");
  return p && *p;
}

}  // namespace

void start_metrics_file(process::Context& c) {
  if (metrics_wanted()) (void)c.get<MetricsFile>();
}

void set_job_counters(const CacheStats& counters) {
  if (!metrics_wanted()) return;
  make_stats_counters();
  process::Context::current().get<MetricsFile>().set_job(counters);
}

}  // namespace npucache::storage
