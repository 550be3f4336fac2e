#include "cache/commit_queue.h"

#include "log/log.h"

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
  static Queue q;
  return q;
}

}  // namespace

void commit_later(std::function<void()> commit) { queue().add(std::move(commit)); }
void wait_for_commits() { queue().wait(); }

}  // namespace npucache::cache
