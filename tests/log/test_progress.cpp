// The progress line: shown on a terminal only, only after a second, erased
// at the end; nothing on a pipe.
#include "log/progress.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace npucache;

namespace {

// Points stderr at `fd` for the scope, then restores it.
class StderrTo {
 public:
  explicit StderrTo(int fd) : saved_(::dup(STDERR_FILENO)) {
    std::fflush(stderr);
    ::dup2(fd, STDERR_FILENO);
  }
  ~StderrTo() {
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
  }

 private:
  int saved_;
};

std::string drain(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string out;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

void work(const char* what) {
  const log::Progress p(what);
  log::Progress::note("pass decompose");  // before a second: not shown
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  log::Progress::note("pass autotune, 3 kernels tuned");
}

}  // namespace

TEST(Progress, ShownOnATerminalAfterASecondThenErased) {
  ::setenv("TERM", "xterm", 1);  // a terminal that draws (TERM=dumb does not)
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  {
    const StderrTo to(slave);
    work("compiling Model.prompt");
  }
  const std::string out = drain(master);
  ::close(master);
  ::close(slave);
  EXPECT_EQ(out.find("pass decompose"), std::string::npos) << out;
  EXPECT_NE(out.find("compiling Model.prompt: pass autotune, 3 kernels tuned (1 s)"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\033[K") << "the line is not erased: " << out;
}

TEST(Progress, NothingOnAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    const StderrTo to(fds[1]);
    work("compiling Model.prompt");
  }
  ::close(fds[1]);
  EXPECT_EQ(drain(fds[0]), "");
  ::close(fds[0]);
}

TEST(Progress, NoteWithoutAScopeDoesNothing) { EXPECT_NO_THROW(log::Progress::note("nothing to show")); }
