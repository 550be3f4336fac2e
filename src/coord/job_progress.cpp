#include "coord/job_progress.h"

#include <npucache/error.h>

#include "process/context.h"

#include <unistd.h>
#include <cstdlib>
#include <cstring>

namespace npucache::coord {

Outcome& Outcome::operator+=(const Outcome& o) {
  loaded += o.loaded;
  compiled += o.compiled;
  received += o.received;
  return *this;
}

std::vector<Outcome> outcomes(const Plan& plan, const std::vector<RankInfo>& ranks, const std::vector<int>& source,
                              const std::vector<int>& host_of, int hosts) {
  std::vector<Outcome> out(static_cast<std::size_t>(hosts > 0 ? hosts : 1));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int h = r < host_of.size() && host_of[r] >= 0 && host_of[r] < hosts ? host_of[r] : 0;
    Outcome& o = out[static_cast<std::size_t>(h)];
    const int g = r < plan.group_of.size() ? plan.group_of[r] : -1;
    if (!ranks[r].needs || g < 0) {
      ++o.loaded;
      continue;
    }
    const int src = static_cast<std::size_t>(g) < source.size() ? source[static_cast<std::size_t>(g)] : -1;
    if (src == static_cast<int>(r))
      ++(ranks[r].holds ? o.loaded : o.compiled);
    else
      ++o.received;
  }
  return out;
}

ProgressMode parse_progress_mode(const std::string& s) {
  if (s == "auto") return ProgressMode::auto_;
  if (s == "always") return ProgressMode::always;
  if (s == "never") return ProgressMode::never;
  throw ConfigError("--progress takes auto, always or never, got '" + s + "'");
}

JobProgress& JobProgress::get() { return process::Context::current().get<JobProgress>(); }

void JobProgress::configure(ProgressMode mode, int expected_methods) {
  std::lock_guard lock(mu_);
  mode_ = mode;
  expected_methods_ = expected_methods;
}

bool JobProgress::enabled() const {
  if (const char* v = std::getenv("NPUCACHE_PROGRESS"); v && *v) return std::strcmp(v, "0") != 0;
  std::lock_guard lock(mu_);
  switch (mode_) {
    case ProgressMode::always: return true;
    case ProgressMode::never: return false;
    case ProgressMode::auto_: break;
  }
  const char* tty = std::getenv("NPUCACHE_STDERR_IS_TTY");
  return ::isatty(STDERR_FILENO) == 1 || (tty && std::strcmp(tty, "1") == 0);
}

void JobProgress::print(const std::string& s) const {
  if (!enabled()) return;
  std::fprintf(out_, "npucache: %s\n", s.c_str());
  std::fflush(out_);
}

void JobProgress::compiling(const std::string& method, int subgraphs, int owners, int world) {
  print(method + ": compiling " + std::to_string(subgraphs) + " subgraph" + (subgraphs == 1 ? "" : "s") + " on " +
        std::to_string(owners) + " of " + std::to_string(world) + " ranks; the others wait for them");
}

namespace {

std::string counts(const Outcome& o) {
  return std::to_string(o.loaded) + " loaded, " + std::to_string(o.compiled) + " compiled, " +
         std::to_string(o.received) + " received";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

void JobProgress::finished(const std::string& method, int world, const std::vector<Outcome>& per_host,
                           const std::vector<std::string>& host_names, bool uncached, double seconds) {
  std::string s;
  {
    std::lock_guard lock(mu_);
    ++methods_;
    seconds_ += seconds;
    Outcome sum;
    for (const Outcome& o : per_host) sum += o;
    job_ += sum;
    if (per_host.size() == host_names.size() && !host_names.empty()) {
      if (hosts_.size() < per_host.size()) {
        hosts_.resize(per_host.size());
        host_names_ = host_names;
      }
      for (std::size_t h = 0; h < per_host.size(); ++h) {
        hosts_[h] += per_host[h];
        // A host's ranks (this method counts each once) loaded every method
        // that all hit before the map existed.
        hosts_[h].loaded += per_host[h].total() * unmapped_all_hit_;
      }
      unmapped_all_hit_ = 0;
    } else if (sum.total() == world && sum.loaded == world) {
      ++unmapped_all_hit_;
    }
    const long total = static_cast<long>(expected_methods_) * world;
    s = std::to_string(methods_) + (expected_methods_ > 0 ? "/" + std::to_string(expected_methods_) : "") + " method" +
        (methods_ == 1 && expected_methods_ <= 1 ? "" : "s") + " (" + method + " " + seconds_text(seconds) +
        (uncached ? ", uncached" : "") + "), " + std::to_string(job_.total()) +
        (total > 0 ? "/" + std::to_string(total) : "") + " rank-methods ready: " + counts(job_);
    if (hosts_.size() > 1)
      for (std::size_t h = 0; h < hosts_.size(); ++h)
        s += "; " + host_names_[h] + " " + std::to_string(hosts_[h].total()) + " (" + counts(hosts_[h]) + ")";
    s += "; " + seconds_text(seconds_) + " in all";
    last_ = s;
  }
  print(s);
}

std::string JobProgress::line() const {
  std::lock_guard lock(mu_);
  return last_;
}

}  // namespace npucache::coord
