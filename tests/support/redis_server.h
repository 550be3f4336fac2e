// A real redis-server for tests: started on 127.0.0.1 at a free port in a
// scratch directory, with the given configuration; killed and removed by
// the destructor (also when a test fails). stop()/resume() send SIGSTOP and
// SIGCONT, kill() SIGKILL. `command` runs one command through the
// library's own connection (remote/redis.h).
#pragma once

#include "remote/redis.h"
#include "support/temp_dir.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace npucache::testing_support {

// A port no socket uses right now (the kernel's choice for port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class RedisServer {
 public:
  // `extra`: more redis-server options, e.g. {"--requirepass", "s3cret"}.
  explicit RedisServer(std::vector<std::string> extra = {}) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      std::vector<std::string> args{NPUCACHE_REDIS_SERVER,
                                    "--port",
                                    std::to_string(port_),
                                    "--bind",
                                    "127.0.0.1",
                                    "--save",
                                    "",
                                    "--appendonly",
                                    "no",
                                    "--dir",
                                    dir_.path().string(),
                                    "--daemonize",
                                    "no",
                                    "--logfile",
                                    (dir_.path() / "log").string()};
      for (auto& e : extra) args.push_back(e);
      extra_ = extra;
      pid_ = ::fork();
      if (pid_ == 0) {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
      }
      if (ready()) return;
      kill();
    }
    dir_.keep();  // for the log the error names
    throw std::runtime_error("redis-server did not start (see " + (dir_.path() / "log").string() + ")");
  }
  ~RedisServer() { kill(); }  // then dir_ is removed
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& attrs = "") const {
    return "redis://127.0.0.1:" + std::to_string(port_) + (attrs.empty() ? "" : "?" + attrs);
  }
  void stop() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);  // a stopped server too, without letting it run first
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // One command; its reply as text (errors as "ERR ..."), integers in decimal.
  std::string command(const remote::Command& c, const std::string& password = "") const {
    remote::Endpoint e;
    e.host = "127.0.0.1";
    e.port = port_;
    e.password = password;
    remote::RedisConnection conn(e, 2.0, 10.0);
    remote::Reply r = conn.run1(c, 10.0);
    if (r.type() == remote::Reply::Type::integer) return std::to_string(r.integer());
    if (r.type() == remote::Reply::Type::nil) return "(nil)";
    if (r.type() == remote::Reply::Type::array) return "(array " + std::to_string(r.size()) + ")";
    return std::string(r.text());
  }
  // Every key of the server.
  std::vector<std::string> keys(const std::string& password = "") const {
    remote::Endpoint e;
    e.host = "127.0.0.1";
    e.port = port_;
    e.password = password;
    remote::RedisConnection conn(e, 2.0, 10.0);
    remote::Reply r = conn.run1({"KEYS", "*"}, 10.0);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < r.size(); ++i) out.emplace_back(r.text_at(i));
    return out;
  }

 private:
  bool ready() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string password;
    for (std::size_t i = 0; i + 1 < extra_.size(); ++i)
      if (extra_[i] == "--requirepass") password = extra_[i + 1];
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      try {
        if (command({"PING"}, password) == "PONG") return true;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  TempDir dir_{"redis"};  // the server's scratch directory
  std::vector<std::string> extra_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace npucache::testing_support
