// The bound on MPI initialisation (mpi/init_watch.h).
#include "mpi/init_watch.h"

#include "log/log.h"
#include "mpi/comm.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <vector>

namespace npucache::mpi {
namespace {

using namespace std::chrono_literals;

// How often a watch refreshes its mark and looks for an alarm.
constexpr auto kTick = 500ms;
// A mark older than this belongs to a job that ended without cleaning up
// (killed, or a stopped rank's); a later watch removes it.
constexpr double kLeftoverAge_s = 3600;
// A job whose alarm is older than this has ended (its ranks exit within a
// second of the alarm): a later watch removes its marks.
constexpr double kAlarmedJobAge_s = 60;
constexpr const char* kAlarm = "expired";

// How long a mark may go without a refresh before its rank counts as
// stopped (refreshed every tick; the bound is half the timeout at most, so
// a rank stopped at the start is seen stopped when the others give up).
double stale_after(double timeout_s) { return std::clamp(timeout_s / 2, 1.0, 2.0); }

double wall_now() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double mtime_of(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

// A whole non-negative number from the environment, else -1.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0 || n < 0 || n > 1 << 24) return -1;
  return static_cast<int>(n);
}

// The launch's job: PMIx's namespace (Open MPI 4 and 5), else Open MPI's
// job id; only characters safe in a file name are kept.
std::string job_id() {
  const char* v = std::getenv("PMIX_NAMESPACE");
  if (!v || !*v) v = std::getenv("OMPI_MCA_orte_ess_jobid");
  std::string id;
  for (const char* c = v ? v : ""; *c && id.size() < 128; ++c)
    id += std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '-' ? *c : '_';
  return id;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// Why the directory `fd` may not hold marks ("" when it may): it must be a
// directory of this user that no one else can write.
std::string not_own(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return path + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return path + " is not a directory";
  if (st.st_uid != ::geteuid()) return path + " belongs to another user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return path + " is writable by others";
  return "";
}

// Opens (creating it 0700) the directory `name` under `at` without following
// a link; -1 with `why` set when it cannot be used.
int open_own_dir(int at, const std::string& name, const std::string& path, std::string* why) {
  if (::mkdirat(at, name.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = path + ": " + std::strerror(errno);
    return -1;
  }
  const int fd = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *why = path + (errno == ELOOP || errno == ENOTDIR ? " is a link or not a directory"
                                                      : ": " + std::string(std::strerror(errno)));
    return -1;
  }
  if (std::string w = not_own(fd, path); !w.empty()) {
    *why = w;
    ::close(fd);
    return -1;
  }
  return fd;
}

// The entries of the directory `fd` (other than . and ..).
std::vector<std::string> entries(int fd) {
  std::vector<std::string> out;
  const int copy = ::dup(fd);
  if (copy < 0) return out;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return out;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  return out;
}

// Removes the directories of other jobs that have ended: one whose alarm
// is a minute old (its ranks gave up), or whose files were all left an hour
// ago or more (no live watch leaves a mark that long without refreshing it).
void sweep(int base, const std::string& mine) {
  const double now = wall_now();
  for (const std::string& job : entries(base)) {
    if (job == mine) continue;
    const int fd = ::openat(base, job.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    const bool mine_to_remove = ::fstat(fd, &st) == 0 && st.st_uid == ::geteuid();
    bool old = now - mtime_of(st) > kLeftoverAge_s;
    const auto files = entries(fd);
    for (const auto& f : files)
      old = old && ::fstatat(fd, f.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            now - mtime_of(st) > kLeftoverAge_s;
    const bool alarmed = ::fstatat(fd, kAlarm, &st, AT_SYMLINK_NOFOLLOW) == 0 && now - mtime_of(st) > kAlarmedJobAge_s;
    if (mine_to_remove && (old || alarmed)) {
      for (const auto& f : files) ::unlinkat(fd, f.c_str(), 0);
      ::unlinkat(base, job.c_str(), AT_REMOVEDIR);
    }
    ::close(fd);
  }
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// "rank 3 has" / "ranks 2, 3 have".
std::string ranks_have(const std::vector<int>& ranks) {
  return rank_list(ranks) + (ranks.size() == 1 ? " has" : " have");
}

}  // namespace

InitWatch::InitWatch(double timeout_s) : timeout_s_(timeout_s) {
  if (!std::isfinite(timeout_s) || timeout_s <= 0) return;
  const int size = env_int("OMPI_COMM_WORLD_SIZE");
  int rank = env_int("OMPI_COMM_WORLD_RANK");
  if (rank < 0) rank = env_int("PMIX_RANK");
  if (size <= 1 || rank < 0 || rank >= size) return;  // not an mpirun launch of several ranks
  rank_ = rank;
  size_ = size;
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  multi_host_ = local > 0 && local < size;
  host_ = host_name();
  started_ = wall_now();
  const char* root = std::getenv("NPUCACHE_INIT_DIR");
  if (!root || !*root) root = std::getenv("TMPDIR");
  if (!root || !*root) root = "/tmp";
  const std::string base_name = "npucache-init-" + std::to_string(::geteuid());
  where_ = std::string(root) + "/" + base_name;
  const std::string job = job_id();
  const int root_fd = ::open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (job.empty()) {
    unusable_ = "the launch gave no job id (PMIX_NAMESPACE)";
  } else if (root_fd < 0) {
    unusable_ = std::string(root) + ": " + std::strerror(errno);
  } else if (const int base = open_own_dir(root_fd, base_name, where_, &unusable_); base >= 0) {
    sweep(base, job);
    dir_fd_ = open_own_dir(base, job, where_ + "/" + job, &unusable_);
    ::close(base);
  }
  if (root_fd >= 0) ::close(root_fd);
  if (dir_fd_ >= 0) {
    const std::string name = std::to_string(rank_);
    mark_fd_ = ::openat(dir_fd_, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mark_fd_ < 0) {
      unusable_ = where_ + "/" + job + "/" + name + ": " + std::strerror(errno);
    } else {
      const std::string text = std::to_string(::getpid()) + " " + host_ + "\n";
      if (::write(mark_fd_, text.data(), text.size()) < 0) {
        // The mark's time is what counts; its text only names the host.
      }
    }
  }
  thread_ = std::thread([this] { run(); });
}

InitWatch::~InitWatch() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_one();
  thread_.join();
  if (mark_fd_ >= 0) {
    ::close(mark_fd_);
    ::unlinkat(dir_fd_, std::to_string(rank_).c_str(), 0);
  }
  if (dir_fd_ >= 0) {
    // The last rank out removes the job's directory (a failure means
    // another rank's mark is still there).
    const std::string path = where_ + "/" + job_id();
    ::rmdir(path.c_str());
    ::close(dir_fd_);
  }
}

void InitWatch::run() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  Clock::time_point last = Clock::now();
  std::unique_lock lock(mu_);
  for (;;) {
    const Clock::time_point wake = std::min<Clock::time_point>(Clock::now() + kTick, deadline);
    if (cv_.wait_until(lock, wake, [&] { return done_; })) return;
    const Clock::time_point now = Clock::now();
    // A tick far later than asked: this process was itself stopped (and
    // continued, perhaps by mpirun ending the job) or starved.
    stalled_s_ = std::max(
        stalled_s_, std::chrono::duration<double>(now - last).count() - std::chrono::duration<double>(kTick).count());
    last = now;
    if (mark_fd_ >= 0) ::futimens(mark_fd_, nullptr);
    int by = rank_;
    double t = timeout_s_;
    if (alarmed(&by, &t) || now >= deadline) {
      lock.unlock();
      expire(by, t);
    }
  }
}

bool InitWatch::alarmed(int* by, double* timeout_s) {
  if (dir_fd_ < 0) return false;
  struct stat st {};
  if (::fstatat(dir_fd_, kAlarm, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return false;
  // Another job's (a reused job id) would be far older.
  if (mtime_of(st) < started_ - timeout_s_) return false;
  alarm_at_ = mtime_of(st);
  const int fd = ::openat(dir_fd_, kAlarm, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0 || std::sscanf(buf, "%d %lf", by, timeout_s) != 2) {
    *by = -1;  // being written: still an alarm
    *timeout_s = timeout_s_;
  }
  return true;
}

std::string InitWatch::missing() const {
  if (alarm_at_ > 0 && alarm_at_ < started_) {
    // The others gave up before this process began: it is the late one.
    char buf[200];
    std::snprintf(buf, sizeof buf, "this rank started it %.1f s after the others had given up waiting for it",
                  started_ - alarm_at_);
    return std::string(buf) + " (it was stopped before it started, or slow to start)";
  }
  if (stalled_s_ > stale_after(timeout_s_)) {
    // The others' marks say nothing now (they may have given up and ended
    // while this process stood still).
    char buf[160];
    std::snprintf(buf, sizeof buf, "this rank was itself stopped or stalled for %.1f s", stalled_s_);
    return std::string(buf) + " (SIGSTOP, a debugger, an overloaded node)";
  }
  if (dir_fd_ < 0) return "which ranks are missing is unknown (no marks: " + unusable_ + ")";
  const double now = wall_now();
  std::map<int, std::pair<double, std::string>> marks;  // rank -> (age, host)
  for (const std::string& name : entries(dir_fd_)) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 8) continue;
    const int r = std::stoi(name);
    struct stat st {};
    if (r >= size_ || ::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::string host;
    if (const int fd = ::openat(dir_fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); fd >= 0) {
      char buf[300] = {};
      if (::read(fd, buf, sizeof buf - 1) > 0) {
        const char* sp = std::strchr(buf, ' ');
        if (sp) host.assign(sp + 1, std::strcspn(sp + 1, "\n"));
      }
      ::close(fd);
    }
    marks[r] = {now - mtime_of(st), host};
  }
  std::vector<int> absent, stale;
  double oldest = 0;
  bool other_hosts = false;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const auto it = marks.find(r);
    if (it == marks.end()) {
      absent.push_back(r);
    } else {
      other_hosts = other_hosts || (!it->second.second.empty() && it->second.second != host_);
      if (it->second.first > stale_after(timeout_s_)) {
        stale.push_back(r);
        oldest = std::max(oldest, it->second.first);
      }
    }
  }
  std::string out;
  if (!absent.empty()) {
    if (multi_host_ && !other_hosts)
      out = ranks_have(absent) + " no mark on this host (" + host_ +
            "): not started (not running, stopped before it, or on a slow node) or running on another host, whose "
            "marks this host cannot see (set NPUCACHE_INIT_DIR to a directory the hosts share to name them)";
    else
      out = ranks_have(absent) + " not started it (not running, stopped before it, or on a slow node)";
  }
  if (!stale.empty()) {
    char age[32];
    std::snprintf(age, sizeof age, "%.1f", oldest);
    out += (out.empty() ? "" : "; ") + rank_list(stale) +
           " started it and stopped answering (stopped or stalled inside it; no sign of life for up to " + age + " s)";
  }
  if (out.empty()) out = "every rank has started it and is running, so initialisation is slow rather than blocked";
  return out;
}

void InitWatch::expire(int by, double timeout_s) const {
  if (by == rank_ && dir_fd_ >= 0) {
    // Tells the other ranks on this host to give up now, with this error.
    const int fd = ::openat(dir_fd_, kAlarm, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      const std::string text = std::to_string(rank_) + " " + seconds(timeout_s) + "\n";
      if (::write(fd, text.data(), text.size()) < 0) {
        // An empty alarm is still an alarm.
      }
      ::close(fd);
    }
  }
  std::string msg = "npucache: error on rank " + std::to_string(rank_) +
                    ": MPI initialisation did not complete within " + seconds(timeout_s) + " s";
  if (by != rank_)
    msg += by >= 0 ? " (rank " + std::to_string(by) + " gave up first)" : " (another rank gave up first)";
  msg += ": " + missing() +
         ". Every rank waits inside MPI_Init for all the others, so the job cannot start and ends; look at those "
         "ranks, or raise the bound if initialisation is merely slow (--timeout of the npucache jobs, "
         "NPUCACHE_INIT_TIMEOUT for other programs)\n";
  std::fputs(msg.c_str(), stderr);
  std::fflush(stderr);
  // The other ranks on this host see the alarm within a tick and print
  // theirs before mpirun, seeing this process end, ends them. The mark
  // stays (a rank printing later must not take this one for absent); the
  // next watch to start removes the job's directory (sweep).
  std::this_thread::sleep_for(2 * kTick + 200ms);
  // MPI is half initialised and another thread is inside it: end the
  // process without running anything else.
  ::_exit(1);
}

double default_init_timeout() {
  constexpr double kDefault = 300;
  const char* v = std::getenv("NPUCACHE_INIT_TIMEOUT");
  if (!v || !*v) return kDefault;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (*end != '\0' || std::isnan(t) || t <= 0) {
    static const bool warned = (log::warn("NPUCACHE_INIT_TIMEOUT '{}' is not a positive number of seconds; MPI "
                                          "initialisation is bounded by the default, {} s",
                                          v, kDefault),
                                true);
    (void)warned;
    return kDefault;
  }
  return t;
}

}  // namespace npucache::mpi
