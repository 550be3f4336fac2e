// The roll call after a bounded operation ran out of time
// (mpi/detail/fault.h).
#include "mpi/detail/fault.h"

#include <npucache/error.h>

#include "mpi/check.h"
#include "process/context.h"
#include "process/env.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace npucache::mpi {
namespace detail {
namespace {

// Deadlines and grace periods on the process context's monotonic clock,
// so tests can control time.
double clock_s() { return process::Context::current().env().monotonic_s(); }

using namespace std::chrono_literals;

struct State {
  std::mutex mu;
  std::condition_variable cv;
  enum class Phase { idle, running, done } phase = Phase::idle;
  std::string verdict;              // the message, once the roll call is over
  std::vector<std::string> hosts;   // per world rank, when known
  std::deque<std::string> buffers;  // of sends never waited for
};

State& state() {
  static auto* s = new State();  // never destroyed: used until the abort
  return *s;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// World ranks 0, W/2 and W-1: ranks are placed host by host, so these are
// on different hosts whenever there are several.
std::vector<int> reporters(int world) {
  std::vector<int> r{0, world / 2, world - 1};
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

bool is_reporter(int rank, int world) {
  const auto r = reporters(world);
  return std::find(r.begin(), r.end(), rank) != r.end();
}

// How long reporters collect answers: long enough for every rank that is
// waiting in some step to answer (they poll every 2 ms), short enough that
// the error comes well within timeout + 5 s.
double grace(double timeout_s) { return std::isfinite(timeout_s) ? std::clamp(timeout_s / 4, 0.5, 1.0) : 1.0; }

std::atomic<bool> g_aborting{false};

// A send whose completion is never awaited; its buffer is kept.
void post(const std::string& text, int dst, int tag) {
  State& s = state();
  const std::string* buf;
  {
    std::lock_guard lock(s.mu);
    s.buffers.push_back(text);
    buf = &s.buffers.back();
  }
  MPI_Request r = MPI_REQUEST_NULL;
  if (MPI_Isend(buf->data(), static_cast<int>(buf->size()), MPI_BYTE, dst, tag, MPI_COMM_WORLD, &r) == MPI_SUCCESS)
    MPI_Request_free(&r);
}

// A message of `tag` from anyone, if one is there.
bool take(int tag, int* src, std::string* text) {
  int found = 0;
  MPI_Message msg;
  MPI_Status st;
  if (MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &found, &msg, &st) != MPI_SUCCESS || !found) return false;
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  text->assign(static_cast<std::size_t>(n), '\0');
  MPI_Mrecv(text->data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  *src = st.MPI_SOURCE;
  return true;
}

bool pending(int tag) {
  int found = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);
  return found != 0;
}

// "<timed out 0|1>\t<timeout>\t<step>": what a rank says in the roll call.
struct Report {
  bool timed_out = false;
  double timeout_s = 0;
  std::string step;
  std::string encode() const {
    std::ostringstream o;
    o.precision(17);
    o << (timed_out ? 1 : 0) << '\t' << timeout_s << '\t' << step;
    return o.str();
  }
  static Report decode(const std::string& s) {
    Report r;
    const auto a = s.find('\t'), b = a == std::string::npos ? a : s.find('\t', a + 1);
    if (b == std::string::npos) return r;
    r.timed_out = s.substr(0, a) == "1";
    try {
      r.timeout_s = std::stod(s.substr(a + 1, b - a - 1));
    } catch (const std::exception&) {
    }
    r.step = s.substr(b + 1);
    return r;
  }
};

std::string seconds(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

// The verdict: the step that ran out of time, then "rank\tstep" per rank
// that answered.
struct Verdict {
  Report failed;
  std::map<int, std::string> answered;
  std::string encode() const {
    std::string out = failed.encode() + "\n";
    for (const auto& [r, step] : answered) out += std::to_string(r) + "\t" + step + "\n";
    return out;
  }
  static Verdict decode(const std::string& s) {
    Verdict v;
    std::istringstream in(s);
    std::string line;
    if (std::getline(in, line)) v.failed = Report::decode(line);
    while (std::getline(in, line)) {
      const auto t = line.find('\t');
      if (t == std::string::npos) continue;
      try {
        v.answered[std::stoi(line.substr(0, t))] = line.substr(t + 1);
      } catch (const std::exception&) {
      }
    }
    return v;
  }
};

// "ranks 2, 3 (node1: all of its ranks)".
std::string with_hosts(const std::vector<int>& ranks, const std::vector<std::string>& hosts, int world) {
  std::string text = rank_list(ranks);
  if (hosts.size() != static_cast<std::size_t>(world) || ranks.empty()) return text;
  if (std::count(hosts.begin(), hosts.end(), hosts.front()) == world) return text;  // one host: nothing to add
  std::map<std::string, std::vector<int>> by_host;
  for (int r : ranks) by_host[hosts[static_cast<std::size_t>(r)]].push_back(r);
  std::string where;
  for (const auto& [h, rs] : by_host) {
    const auto all = std::count(hosts.begin(), hosts.end(), h);
    where += (where.empty() ? "" : "; ") + h +
             (static_cast<std::size_t>(all) == rs.size() ? ": all of its ranks" : ": " + rank_list(rs));
  }
  return text + " (" + where + ")";
}

std::string describe(const Verdict& v, const Step& mine, int world, const std::vector<std::string>& hosts) {
  const std::string step = v.failed.step.empty() ? mine.name : v.failed.step;
  const double timeout = v.failed.step.empty() ? mine.timeout_s : v.failed.timeout_s;
  std::string msg = "step '" + step + "' did not complete within " + seconds(timeout) + " s";
  if (mine.name != step) msg += " (this rank was in '" + mine.name + "')";
  std::vector<int> missing;
  for (int r = 0; r < world; ++r)
    if (!v.answered.count(r)) missing.push_back(r);
  if (missing.empty()) {
    msg += ": every rank answered the roll call, so a rank was slow rather than gone (raise --timeout)";
  } else {
    msg += ": " + with_hosts(missing, hosts, world) +
           " did not answer (stopped, crashed, cut off from the network, busy outside npucache, or running another "
           "command)";
  }
  std::map<std::string, std::vector<int>> waiting;
  for (const auto& [r, s] : v.answered) waiting[s].push_back(r);
  int shown = 0;
  for (const auto& [s, rs] : waiting) {
    if (++shown > 4) {
      msg += "; ...";
      break;
    }
    msg += std::string(shown == 1 ? "; " : ", ") + rank_list(rs) + (rs.size() == 1 ? " was" : " were") +
           " waiting in '" + s + "'";
  }
  return msg + ". The job cannot go on (MPI cannot abandon a collective half-way): end it and start it again";
}

std::string roll_call(const Step& step, bool timed_out) {
  const int me = world_rank(), world = world_size();
  std::vector<std::string> hosts;
  {
    std::lock_guard lock(state().mu);
    hosts = state().hosts;
  }
  Report mine{timed_out, step.timeout_s, step.name};
  Verdict v;
  if (timed_out) v.failed = mine;
  if (world == 1) {
    v.answered[me] = step.name;
    return describe(v, step, world, hosts);
  }
  const auto reps = reporters(world);
  for (int r : reps)
    if (r != me) post(mine.encode(), r, kHereTag);
  int src = 0;
  std::string text;
  auto note_failure = [&](const std::string& t) {
    Report r = Report::decode(t);
    if (v.failed.step.empty() && r.timed_out) v.failed = r;
  };
  const double g = grace(std::isfinite(step.timeout_s) ? step.timeout_s : 4.0);
  if (is_reporter(me, world)) {
    v.answered[me] = step.name;
    for (int r = 0; r < world; ++r)
      if (r != me) post(mine.encode(), r, kAlarmTag);
    const double end = clock_s() + g;
    while (clock_s() < end) {
      bool any = false;
      while (take(kHereTag, &src, &text)) {
        v.answered[src] = Report::decode(text).step;
        note_failure(text);
        any = true;
      }
      while (take(kAlarmTag, &src, &text)) note_failure(text);
      if (!any) std::this_thread::sleep_for(1ms);
    }
    const std::string out = v.encode();
    for (int r = 0; r < world; ++r)
      if (r != me) post(out, r, kVerdictTag);
    return describe(v, step, world, hosts);
  }
  // A reporter may enter its grace period up to one poll later than this
  // rank, and may be slower to wake: wait for its verdict a little longer.
  const double end = clock_s() + g + 2.5;
  while (clock_s() < end) {
    if (take(kVerdictTag, &src, &text)) return describe(Verdict::decode(text), step, world, hosts);
    while (take(kAlarmTag, &src, &text)) note_failure(text);
    std::this_thread::sleep_for(1ms);
  }
  std::vector<int> others;
  for (int r : reps)
    if (r != me) others.push_back(r);
  return "step '" + step.name + "' did not complete within " + seconds(step.timeout_s) + " s, and no reporter (" +
         rank_list(others) +
         ") answered the roll call, so which ranks are missing is unknown (the reporters are among them). The job "
         "cannot go on: end it and start it again";
}

// Whether another rank (or another thread of this one) reports trouble.
bool trouble_reported(int me, int world) {
  {
    std::lock_guard lock(state().mu);
    if (state().phase != State::Phase::idle) return true;
  }
  if (world == 1) return false;
  return pending(kAlarmTag) || pending(kVerdictTag) || (is_reporter(me, world) && pending(kHereTag));
}

}  // namespace

double deadline_of(const Step& step) {
  return std::isfinite(step.timeout_s) ? clock_s() + step.timeout_s : std::numeric_limits<double>::infinity();
}

void fail(const Step& step, bool timed_out) {
  State& s = state();
  {
    std::unique_lock lock(s.mu);
    if (s.phase == State::Phase::running) s.cv.wait(lock, [&] { return s.phase == State::Phase::done; });
    if (s.phase == State::Phase::done) throw TimeoutError(s.verdict);
    s.phase = State::Phase::running;
  }
  std::string verdict = roll_call(step, timed_out);
  {
    std::lock_guard lock(s.mu);
    s.verdict = verdict;
    s.phase = State::Phase::done;
  }
  s.cv.notify_all();
  throw TimeoutError(verdict);
}

void wait_all(MPI_Request* reqs, int n, const Step& step, double deadline, MPI_Status* statuses) {
  const int me = world_rank(), world = world_size();
  double next_probe = 0;
  auto pause = std::chrono::microseconds(20);
  for (int spins = 0;; ++spins) {
    while (g_aborting.load()) std::this_thread::sleep_for(std::chrono::hours(1));
    int done = 0;
    check(MPI_Testall(n, reqs, &done, statuses), "MPI_Testall");
    if (done) return;
    const double now = clock_s();
    if (now >= deadline) fail(step, true);
    if (now >= next_probe) {
      if (trouble_reported(me, world)) fail(step, false);
      next_probe = now + 0.002;
    }
    // Yield first (a small message arrives within microseconds), then back
    // off to sleeps: ranks oversubscribe cores and a spinning waiter would
    // take the CPU from the rank it waits for.
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      // At most 200 us: a collective of several rounds needs a poll per
      // round to progress (libnbc has no progress thread), so a long sleep
      // would add to each round's latency.
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }
}

void abort_job(int code) {
  g_aborting.store(true);
  std::this_thread::sleep_for(20ms);  // a thread inside MPI_Testall leaves it
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

void run_watched(const Step& step, const std::function<void()>& fn) {
  if (!std::isfinite(step.timeout_s)) {
    fn();
    return;
  }
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(step.timeout_s);
  std::thread dog([&] {
    std::unique_lock lock(m);
    if (cv.wait_until(lock, until, [&] { return finished; })) return;
    lock.unlock();
    std::string msg;
    try {
      fail(step, true);
    } catch (const std::exception& e) {
      msg = e.what();
    }
    std::fprintf(stderr, "npucache: error on rank %d: %s (aborting the job: MPI cannot abandon %s)\n", world_rank(),
                 msg.c_str(), step.name.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(300ms);  // let the other ranks print theirs
    abort_job(1);
  });
  auto finish = [&] {
    {
      std::lock_guard lock(m);
      finished = true;
    }
    cv.notify_one();
    dog.join();
  };
  try {
    fn();
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

}  // namespace detail

void set_host_names(std::vector<std::string> hosts) {
  std::lock_guard lock(detail::state().mu);
  detail::state().hosts = std::move(hosts);
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + out;
}

}  // namespace npucache::mpi
