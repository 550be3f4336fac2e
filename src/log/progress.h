// A progress line for work that can take more than about a second (a
// compile, an import or export): printed to stderr only when stderr is a
// terminal and the work has already run for a second, redrawn in place at
// most five times a second, and erased when the work ends, so logs, pipes
// and MPI runs never see it.
//
// A Progress is a scope on one thread; code below it on that thread (a
// compiler pass, a loop over objects) reports its state with
// Progress::note() without knowing whether anyone shows it. Nested scopes
// show the innermost.
#pragma once

#include <chrono>
#include <string>

namespace npucache::log {

class Progress {
 public:
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The state of the innermost Progress of this thread ("pass autotune, 12
  // kernels tuned"); nothing when there is none.
  static void note(const std::string& state);

 private:
  void show(const std::string& state);

  std::string what_;
  Progress* outer_;
  std::chrono::steady_clock::time_point start_, last_;
  bool tty_;
  bool shown_ = false;
};

}  // namespace npucache::log
