// A one-line progress indicator on stderr, shown only on a terminal.
#pragma once

#include <cstdio>
#include <string>
#include <unistd.h>

namespace npucache::tools {

class Progress {
 public:
  Progress(std::string what, std::size_t total)
      : what_(std::move(what)), total_(total), tty_(::isatty(STDERR_FILENO) != 0) {}
  void step() {
    ++done_;
    if (tty_) std::fprintf(stderr, "\r%s %zu/%zu", what_.c_str(), done_, total_);
  }
  void done() {
    if (tty_ && done_) std::fprintf(stderr, "\n");
  }

 private:
  std::string what_;
  std::size_t total_, done_ = 0;
  bool tty_;
};

}  // namespace npucache::tools
