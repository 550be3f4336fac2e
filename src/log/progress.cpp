#include "log/progress.h"

#include "log/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace npucache::log {
namespace {

thread_local Progress* innermost = nullptr;
std::atomic<bool> line_drawn{false};  // a progress line is on the terminal

constexpr std::chrono::milliseconds kQuiet{1000};  // nothing before this
constexpr std::chrono::milliseconds kRedraw{200};  // at most this often

bool terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) == 1 && !(term && std::string(term) == "dumb");
}

}  // namespace

Progress::Progress(std::string what)
    : what_(std::move(what)),
      outer_(innermost),
      start_(std::chrono::steady_clock::now()),
      last_(start_),
      tty_(terminal()) {
  innermost = this;
}

Progress::~Progress() {
  innermost = outer_;
  if (shown_) clear_progress_line();
}

void clear_progress_line() {
  if (!line_drawn.exchange(false, std::memory_order_relaxed)) return;
  std::fputs("\r\033[K", stderr);  // erase the line
  std::fflush(stderr);
}

void Progress::note(const std::string& state) {
  if (innermost) innermost->show(state);
}

void Progress::show(const std::string& state) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < kQuiet || (shown_ && now - last_ < kRedraw)) return;
  last_ = now;
  shown_ = true;
  const double s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r\033[K%s: %s (%.0f s)", what_.c_str(), state.c_str(), s);
  std::fflush(stderr);
  line_drawn.store(true, std::memory_order_relaxed);
}

}  // namespace npucache::log
