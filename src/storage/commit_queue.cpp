#include "storage/commit_queue.h"

#include "compiler/tuning_table.h"
#include "h5/h5.h"
#include "log/log.h"
#include "process/context.h"
#include "storage/stats.h"

#include <sys/resource.h>
#include <unistd.h>
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
      todo_.push_back(std::move(f));
      if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return todo_.empty() && !busy_; });
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
      auto f = std::move(todo_.front());
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
  std::deque<std::function<void()>> todo_;
  bool busy_ = false, stop_ = false;
  std::thread worker_;
};

Queue& queue() { return process::Context::current().get<Queue>(); }

}  // namespace

void commit_later(std::function<void()> commit) { queue().add(std::move(commit)); }
void wait_for_commits() { queue().wait(); }

}  // namespace npucache::storage
