#include "remote/redis.h"
#include "remote/resp_reader.h"

#include <hiredis/hiredis.h>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

namespace npucache::remote {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Waits until `fd` is ready for `events` or the deadline passes (RedisError
// timeout naming `what`).
void wait_for(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw RedisError(Failure::timeout, std::string("no answer in time (") + what + ")");
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left + 1, 1 << 30)));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) throw RedisError(Failure::dropped, std::string("poll: ") + std::strerror(errno));
  }
}

// A socket that owns its descriptor.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

// Finishes a non-blocking connect within the deadline.
void finish_connect(int fd, int rc, Clock::time_point deadline, const std::string& where) {
  if (rc != 0 && errno != EINPROGRESS && errno != EAGAIN)
    throw RedisError(Failure::refused, where + ": " + std::strerror(errno));
  if (rc != 0) {
    try {
      wait_for(fd, POLLOUT, deadline, "connecting");
    } catch (const RedisError& e) {
      if (e.kind() == Failure::timeout)
        throw RedisError(Failure::timeout, where + ": no connection within the connect timeout");
      throw;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) throw RedisError(Failure::refused, where + ": " + std::strerror(err));
  }
}

int connect_tcp(const Endpoint& e, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = e.host + ":" + std::to_string(e.port);
  if (const int rc = ::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &found); rc != 0)
    throw RedisError(Failure::refused, where + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
  std::string last = where + ": no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    Socket s{::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol)};
    if (s.fd < 0) {
      last = where + ": " + std::strerror(errno);
      continue;
    }
    try {
      finish_connect(s.fd, ::connect(s.fd, a->ai_addr, a->ai_addrlen), deadline, where);
    } catch (const RedisError& err) {
      if (err.kind() == Failure::timeout || !a->ai_next) throw;
      last = err.what();
      continue;
    }
    const int one = 1;
    ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s.release();
  }
  throw RedisError(Failure::refused, last);
}

int connect_unix(const Endpoint& e, Clock::time_point deadline) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (e.path.size() >= sizeof a.sun_path) throw RedisError(Failure::refused, e.path + ": the socket path is too long");
  std::memcpy(a.sun_path, e.path.c_str(), e.path.size() + 1);
  Socket s{::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) throw RedisError(Failure::refused, e.path + ": " + std::strerror(errno));
  finish_connect(s.fd, ::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a), deadline, e.path);
  return s.release();
}

}  // namespace

// --- Reply -----------------------------------------------------------------

namespace {

const Reply::Node& element(const std::unique_ptr<Reply::Node>& n, std::size_t i) {
  static const Reply::Node nil;
  return i < n->elements.size() && n->elements[i] ? *n->elements[i] : nil;
}

}  // namespace

Reply::Reply(Node* n) : n_(n) {}
Reply::~Reply() = default;
Reply::Reply(Reply&&) noexcept = default;
Reply& Reply::operator=(Reply&&) noexcept = default;
Reply::Type Reply::type() const { return n_->type; }
std::string_view Reply::text() const { return n_->str; }
std::string Reply::take_text() { return std::move(n_->str); }
long long Reply::integer() const { return n_->integer; }
std::size_t Reply::size() const { return n_->type == Type::array ? n_->elements.size() : 0; }
Reply::Type Reply::type_at(std::size_t i) const { return element(n_, i).type; }
std::string_view Reply::text_at(std::size_t i) const { return element(n_, i).str; }
std::string Reply::take_text_at(std::size_t i) {
  return i < n_->elements.size() && n_->elements[i] ? std::move(n_->elements[i]->str) : std::string();
}
long long Reply::integer_at(std::size_t i) const { return element(n_, i).integer; }
Reply Reply::take_at(std::size_t i) {
  if (i < n_->elements.size() && n_->elements[i]) return Reply(n_->elements[i].release());
  return Reply(new Node);
}

// --- RedisConnection ---------------------------------------------------------

struct RedisConnection::State {
  explicit State(ReplyLimits limits) : reader(limits) {}
  int fd = -1;
  RespReader reader;
  std::string buf = std::string(std::size_t{1} << 20, '\0');  // one recv's worth, reused
  ~State() {
    if (fd >= 0) ::close(fd);
  }
};

RedisConnection::RedisConnection(const Endpoint& e, double connect_timeout_s, double timeout_s, ReplyLimits limits)
    : s_(std::make_unique<State>(limits)) {
  const auto deadline = deadline_after(connect_timeout_s);
  s_->fd = e.unix_socket ? connect_unix(e, deadline) : connect_tcp(e, deadline);
  std::vector<Command> hello;
  if (!e.password.empty()) {
    if (e.user.empty())
      hello.push_back({"AUTH", e.password});
    else
      hello.push_back({"AUTH", e.user, e.password});
  }
  const std::string db = std::to_string(e.db);
  if (e.db != 0) hello.push_back({"SELECT", db});
  if (hello.empty()) return;
  for (const Reply& r : run(hello, timeout_s)) {
    if (r.type() != Reply::Type::error) continue;
    const std::string_view t = r.text();
    const bool auth = t.starts_with("WRONGPASS") || t.starts_with("NOAUTH") ||
                      t.find("password") != std::string_view::npos || t.find("AUTH") != std::string_view::npos;
    throw RedisError(auth ? Failure::auth : Failure::server, std::string(t));
  }
}

RedisConnection::~RedisConnection() = default;
RedisConnection::RedisConnection(RedisConnection&&) noexcept = default;
RedisConnection& RedisConnection::operator=(RedisConnection&&) noexcept = default;

std::vector<Reply> RedisConnection::run(const std::vector<Command>& commands, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  // Format every command (hiredis's protocol writer), then send and read
  // interleaved, so a long pipeline never blocks on the server's replies.
  std::string out;
  for (const Command& c : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (std::string_view a : c) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const int n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0 || !cmd) throw RedisError(Failure::server, "cannot format a command");
    out.append(cmd, static_cast<std::size_t>(n));
    redisFreeCommand(cmd);
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  std::size_t sent = 0;
  std::string& buf = s_->buf;
  const auto read_some = [&]() -> bool {  // false: nothing to read now
    const ssize_t n = ::recv(s_->fd, buf.data(), buf.size(), 0);
    if (n > 0) {
      s_->reader.feed(buf.data(), static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0) throw RedisError(Failure::dropped, "the server closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    throw RedisError(Failure::dropped, std::string("reading: ") + std::strerror(errno));
  };
  const auto take_replies = [&] {
    while (replies.size() < commands.size()) {
      std::unique_ptr<Reply::Node> r = s_->reader.next();
      if (!r) return;
      replies.emplace_back(r.release());
    }
  };
  while (sent < out.size()) {
    const ssize_t n = ::send(s_->fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      throw RedisError(Failure::dropped, std::string("sending: ") + std::strerror(errno));
    // The socket is full: read what the server answered so far, else wait.
    if (read_some()) {
      take_replies();
      continue;
    }
    wait_for(s_->fd, POLLOUT | POLLIN, deadline, "sending");
  }
  take_replies();
  while (replies.size() < commands.size()) {
    if (!read_some()) {
      wait_for(s_->fd, POLLIN, deadline, "waiting for the reply");
      continue;
    }
    take_replies();
  }
  return replies;
}

}  // namespace npucache::remote
