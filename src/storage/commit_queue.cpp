#include "storage/commit_queue.h"

#include "compiler/tuning_table.h"
#include "h5/h5.h"
#include "log/log.h"
#include "process/context.h"
#include "storage/stats.h"

#include <sys/resource.h>
#include <unistd.h>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace npucache::storage {
namespace {

// A service of the process context. Made after what a commit uses (HDF5,
// the tuning table, the statistics' counters: its constructor makes them),
// so the context's shutdown drains it before they go. Its thread works in
// that context (process::Context::Bind), whatever context the program makes
// current meanwhile: the services a commit uses are its context's, which
// joins the thread before destroying them.
using Clock = std::chrono::steady_clock;

// How long a commit waits after it was queued: a start served from the
// remote tier is ready within tens of milliseconds of its reads (the
// examples' 10-40 ms, perf/bench_remote), and a commit beside it took CPU
// from it (on a 2-core machine about 2 ms of a 15 ms start). A flush, a
// wait_for_commits() or the end of the process runs what is queued at once.
constexpr auto kSettle = std::chrono::milliseconds(200);

class Queue {
 public:
  explicit Queue(process::Context& c) : context_(c) {
    h5::init();
    (void)c.get<compiler::TuningTable>();
    make_stats_counters();
    c.on_flush([this] { wait(); });
  }
  ~Queue() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();  // runs what is queued first
  }
  void add(std::function<void()> f) {
    {
      std::lock_guard lock(mu_);
      todo_.push_back({std::move(f), Clock::now() + kSettle});
      if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    ++hurry_;  // what is queued runs now
    cv_.notify_all();
    idle_.wait(lock, [&] { return todo_.empty() && !busy_; });
    --hurry_;
  }

 private:
  void run() {
    const process::Context::Bind bind(context_);
    // Below the job's threads: a commit must not slow the path to ready.
    (void)!::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !todo_.empty(); });
      if (todo_.empty()) return;  // stopping, nothing left
      // A commit waits until the start that queued it had time to become
      // ready, unless the process flushes or ends first.
      cv_.wait_until(lock, todo_.front().not_before, [&] { return stop_ || hurry_ > 0; });
      auto f = std::move(todo_.front().run);
      todo_.pop_front();
      busy_ = true;
      lock.unlock();
      try {
        f();
      } catch (const std::exception& e) {
        log::warn("a background cache commit failed: {}", e.what());
      }
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
  }
  process::Context& context_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  struct Commit {
    std::function<void()> run;
    Clock::time_point not_before;
  };
  std::deque<Commit> todo_;
  bool busy_ = false, stop_ = false;
  int hurry_ = 0;  // callers of wait() waiting
  std::thread worker_;
};

Queue& queue() { return process::Context::current().get<Queue>(); }

}  // namespace

void commit_later(std::function<void()> commit) { queue().add(std::move(commit)); }
void wait_for_commits() { queue().wait(); }

}  // namespace npucache::storage
