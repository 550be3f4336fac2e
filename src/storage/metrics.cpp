#include "storage/metrics.h"

#include "format/cache_error.h"
#include "log/log.h"
#include "process/context.h"
#include "process/dry_run.h"
#include "storage/dir.h"
#include "storage/store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace npucache::storage {
namespace fs = std::filesystem;

CacheBytes cache_bytes(const fs::path& dir, KnownObjects* known) {
  CacheBytes b;
  try {
    const Store s = Store::open(dir, Create::no);
    KnownObjects now;
    for (const auto& key : s.object_keys()) {
      const auto info = s.object_stat(key);
      if (!info || !info->regular) continue;
      b.stored += static_cast<uint64_t>(std::max<int64_t>(info->size, 0));
      KnownObjects::Known k{static_cast<uint64_t>(info->ino), info->size, info->mtime_ns, 0};
      const KnownObjects::Known* seen = nullptr;
      if (known)
        if (const auto it = known->by_key.find(key); it != known->by_key.end()) seen = &it->second;
      if (seen && seen->ino == k.ino && seen->size == k.size && seen->mtime_ns == k.mtime_ns) {
        k.raw = seen->raw;
      } else {
        try {
          k.raw = s.object_meta(key).raw_size;  // its header only
        } catch (const CacheError&) {
          continue;  // damaged: read again next time (it may be replaced)
        }
      }
      b.raw += k.raw;
      if (known) now.by_key.emplace(key, k);
    }
    if (known) *known = std::move(now);
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
  e.family("npucache_regions_total", "counter",
           "Compile regions of the methods compiled: reused (taken compiled from the store) or compiled; and "
           "copied (written into the store from objects that came from elsewhere).");
  e.sample("result", "reused", d(c.region_hits));
  e.sample("result", "compiled", d(c.region_compiles));
  e.sample("result", "copied", d(c.region_copies));
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
constexpr double kMinInterval = 1.0;
constexpr double kMaxInterval = 3600.0;
// The cache's size is read again at most this often (it lists the objects).
constexpr auto kBytesEvery = std::chrono::seconds(60);
// The metrics file's mode (less the umask): node_exporter runs as a user
// of its own.
constexpr mode_t kFileMode = 0644;

// The rank mpiexec gave this process (Open MPI, MPICH/Hydra, Slurm), -1
// without one: seen before MPI starts and after it ends.
int launched_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return -1;
}

// The metrics file: a service of the process context, made after the
// counters it writes and the dry-run switch it asks (so destroyed before
// them). Its thread works in that context and stops in the context's last
// flush (shutdown, or the program's exit), before the final write and
// before any service goes. It belongs to the process that made it: a child
// forked from that process neither writes the file nor waits for the
// thread (which is not in the child).
class MetricsFile {
 public:
  explicit MetricsFile(process::Context& c)
      : context_(c), dry_run_(c.get<process::DryRun>()), path_(std::getenv("NPUCACHE_METRICS_FILE")) {
    make_stats_counters();
    interval_ = metrics_interval();
    c.on_flush([this] { flushed(); });
    shared_->worker = std::thread([this] { run(); });
  }
  ~MetricsFile() {
    if (forked()) {
      // The thread was not copied into this child, and what it shares may
      // be as the parent's thread left it when the parent forked (a lock
      // taken, a waiter counted: destroying the condition variable would
      // wait for that waiter forever). It is kept, never destroyed nor
      // joined.
      static auto* const kept = new std::vector<std::unique_ptr<Shared>>;
      kept->push_back(std::move(shared_));
      return;
    }
    stop();
  }
  void set_job(const CacheStats& counters) {
    if (forked()) return;
    {
      std::lock_guard lock(shared_->mu);
      shared_->job = counters;
    }
    write();
  }
  // Writes the file now (rank 0 of a job, or a process of its own).
  void write() {
    if (forked() || dry_run_.on()) return;
    // Another rank of an MPI job never writes, also after MPI ends.
    const process::Identity who = context_.identity();
    if (who.world_size > 1 && who.world_rank != 0) other_rank_ = true;
    if (other_rank_) return;
    std::lock_guard write_lock(shared_->write_mu);
    std::optional<CacheStats> job;
    {
      std::lock_guard lock(shared_->mu);
      job = shared_->job;
    }
    const CacheStats counters = job ? *job : process_counters();
    if (!bytes_ || Clock::now() - bytes_at_ >= kBytesEvery) {
      CacheBytes b;
      for (const auto& dir : process_dirs()) {
        const CacheBytes one = cache_bytes(dir, &known_[dir.string()]);
        b.stored += one.stored;
        b.raw += one.raw;
      }
      bytes_ = b;
      bytes_at_ = Clock::now();
    }
    try {
      write_file_atomically(path_, prometheus_text(counters, bytes_), kFileMode);
    } catch (const std::exception& e) {
      if (!warned_.exchange(true))
        log::warn("the metrics file NPUCACHE_METRICS_FILE={} is not written ({}); the process goes on without it",
                  path_.string(), e.what());
    }
  }

 private:
  bool forked() const { return ::getpid() != owner_; }
  // The context's flush: its last one stops the thread first.
  void flushed() {
    if (forked()) return;
    if (context_.ending()) stop();
    write();
  }
  void stop() {
    {
      std::lock_guard lock(shared_->mu);
      shared_->stop = true;
    }
    shared_->cv.notify_all();
    std::thread& w = shared_->worker;
    if (w.joinable() && w.get_id() != std::this_thread::get_id()) w.join();
  }
  void run() {
    const process::Context::Bind bind(context_);
    Shared& sh = *shared_;
    std::unique_lock lock(sh.mu);
    while (!sh.stop) {
      sh.cv.wait_for(lock, std::chrono::duration<double>(interval_), [&] { return sh.stop; });
      if (sh.stop) break;
      lock.unlock();
      write();
      lock.lock();
    }
  }

  process::Context& context_;
  const process::DryRun& dry_run_;
  const pid_t owner_ = ::getpid();
  fs::path path_;
  double interval_ = kDefaultInterval;
  // What the thread shares with the others.
  struct Shared {
    std::mutex mu;        // stop, job
    std::mutex write_mu;  // one write at a time: bytes_, bytes_at_, known_
    std::condition_variable cv;
    bool stop = false;
    std::optional<CacheStats> job;
    std::thread worker;
  };
  std::unique_ptr<Shared> shared_ = std::make_unique<Shared>();
  std::optional<CacheBytes> bytes_;
  Clock::time_point bytes_at_;
  std::map<std::string, KnownObjects> known_;  // by cache directory
  std::atomic<bool> warned_{false};
  std::atomic<bool> other_rank_{launched_rank() > 0};
};

bool metrics_wanted() {
  const char* p = std::getenv("NPUCACHE_METRICS_FILE");
  return p && *p;
}

}  // namespace

double metrics_interval() {
  const char* v = std::getenv("NPUCACHE_METRICS_INTERVAL");
  if (!v || !*v) return kDefaultInterval;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end && *end == '\0' && std::isfinite(s) && s >= kMinInterval && s <= kMaxInterval) return s;
  log::warn(
      "NPUCACHE_METRICS_INTERVAL='{}' is not a number of seconds in [{}, {}]; writing the metrics file every {} s", v,
      kMinInterval, kMaxInterval, kDefaultInterval);
  return kDefaultInterval;
}

void start_metrics_file(process::Context& c) {
  if (!metrics_wanted() || c.get<process::DryRun>().on()) return;
  // The counters first: made, they start the file themselves (one file,
  // not a second one made inside the first's constructor).
  make_stats_counters();
  (void)c.get<MetricsFile>();
}

void set_job_counters(const CacheStats& counters) {
  if (!metrics_wanted() || process::dry_run()) return;
  make_stats_counters();
  process::Context::current().get<MetricsFile>().set_job(counters);
}

}  // namespace npucache::storage
