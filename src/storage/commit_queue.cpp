#include "storage/commit_queue.h"

#include "compiler/tuning_table.h"
#include "h5/h5.h"
#include "log/log.h"
#include "storage/stats.h"

#include <sys/resource.h>
#include <unistd.h>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace npucache::cache {
namespace {

class Queue {
 public:
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
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> todo_;
  bool busy_ = false, stop_ = false;
  std::thread worker_;
};

Queue& queue() {
  // At exit the queue is drained by its destructor, and function-local
  // statics are destroyed (and HDF5 shut down) in the reverse order they
  // were made: what a commit uses is made first, so it outlives the queue.
  // (The statistics' counters are made here too; the other objects a commit
  // reads -- the index cache, the component names, the warned and loaded
  // sets -- are never destroyed, so their order does not matter.)
  static const bool ready = (h5::init(), compiler::TuningTable::process(), make_stats_counters(), true);
  (void)ready;
  static Queue q;
  return q;
}

}  // namespace

void commit_later(std::function<void()> commit) { queue().add(std::move(commit)); }
void wait_for_commits() { queue().wait(); }

}  // namespace npucache::cache
