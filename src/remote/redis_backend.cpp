// The Redis backend (backend.h): one lazily made connection, commands
// mapped to the Backend calls, error replies and connection failures turned
// into typed answers.
#include "remote/backend.h"
#include "remote/redis.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <new>
#include <optional>

namespace npucache::remote {
namespace {

// A listing (SCAN) as a whole: at most the longer of Config::list_timeout_s
// and this many of the remote's timeouts, and this many keys (signature
// records included).
constexpr double kListTimeouts = 4;
constexpr std::size_t kMaxListedKeys = std::size_t{1} << 20;

// An error reply as a fault.
Fault error_fault(std::string_view text) {
  if (text.starts_with("OOM")) return {Failure::full, std::string(text)};
  if (text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") || text.starts_with("NOPERM"))
    return {Failure::auth, std::string(text)};
  return {Failure::server, std::string(text)};
}

// Whether a fault means the connection cannot be used any more.
bool connection_level(Failure f) {
  return f == Failure::refused || f == Failure::timeout || f == Failure::auth || f == Failure::dropped;
}

class RedisBackend final : public Backend {
 public:
  explicit RedisBackend(const Config& c) : Backend(c) {}

  Answer<std::string> get(const std::string& key) override {
    return one<std::string>({"GET", key}, [](Reply& r) -> Answer<std::string> {
      if (r.type() == Reply::Type::nil) return Answer<std::string>::miss();
      if (r.type() != Reply::Type::string) return Answer<std::string>::failed(unexpected(r));
      return Answer<std::string>::hit(r.take_text());
    });
  }

  std::vector<Answer<std::string>> get_many(const std::vector<std::string>& keys) override {
    std::vector<Answer<std::string>> out;
    if (keys.empty()) return out;
    std::vector<Command> cmds;
    for (const auto& k : keys) cmds.push_back({"GET", k});
    std::vector<Reply> replies;
    if (auto f = run(cmds, &replies)) {
      for (std::size_t i = 0; i < keys.size(); ++i) out.push_back(Answer<std::string>::failed(*f));
      return out;
    }
    for (Reply& r : replies) {
      if (r.type() == Reply::Type::nil)
        out.push_back(Answer<std::string>::miss());
      else if (r.type() == Reply::Type::string)
        out.push_back(Answer<std::string>::hit(r.take_text()));
      else
        out.push_back(Answer<std::string>::failed(unexpected(r)));
    }
    return out;
  }

  Answer<bool> put(const std::string& key, std::string_view value, Overwrite overwrite) override {
    Command c{"SET", key, value};
    if (overwrite == Overwrite::no) c.push_back("NX");
    return one<bool>(c, [](const Reply& r) -> Answer<bool> {
      if (r.type() == Reply::Type::nil) return Answer<bool>::hit(false);
      if (r.type() == Reply::Type::status) return Answer<bool>::hit(true);
      return Answer<bool>::failed(unexpected(r));
    });
  }

  Answer<std::size_t> remove(const std::vector<std::string>& keys) override {
    if (keys.empty()) return Answer<std::size_t>::hit(0);
    Command c{"DEL"};
    for (const auto& k : keys) c.push_back(k);
    return one<std::size_t>(c, [](const Reply& r) -> Answer<std::size_t> {
      if (r.type() != Reply::Type::integer) return Answer<std::size_t>::failed(unexpected(r));
      return Answer<std::size_t>::hit(static_cast<std::size_t>(r.integer()));
    });
  }

  // SCAN MATCH: a cursor walk over the keyspace (never KEYS, which blocks
  // the server), one round trip per step.
  Answer<std::vector<std::string>> list(const std::string& prefix) override {
    using A = Answer<std::vector<std::string>>;
    std::string pattern;
    for (char ch : prefix) {
      if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') pattern += '\\';
      pattern += ch;
    }
    pattern += '*';
    std::vector<std::string> keys;
    std::string cursor = "0";
    // Bounded as a whole, not only per round trip: a server that keeps
    // answering with a cursor (anything listening on the port, or a
    // keyspace of millions) ends the listing within its bound (above) and
    // kMaxListedKeys keys, a failure as any other.
    const double bound_s = std::max(config().list_timeout_s, kListTimeouts * config().timeout_s);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(bound_s);
    do {
      if (cursor != "0" && std::chrono::steady_clock::now() > deadline)
        return A::failed({Failure::timeout, "listing the keys under '" + prefix + "' did not end within " +
                                                std::to_string(static_cast<long>(bound_s)) +
                                                " s (the server keeps answering with a cursor; list-timeout)"});
      std::vector<Reply> replies;
      if (auto f = run({{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}}, &replies)) return A::failed(*f);
      Reply& r = replies.front();
      if (r.type() != Reply::Type::array || r.size() != 2 || r.type_at(0) != Reply::Type::string)
        return A::failed(unexpected(r));
      cursor = r.take_text_at(0);
      Reply page = r.take_at(1);
      if (page.type() != Reply::Type::array) return A::failed(unexpected(page));
      for (std::size_t i = 0; i < page.size(); ++i) keys.push_back(page.take_text_at(i));
      if (keys.size() > kMaxListedKeys)
        return A::failed({Failure::too_large, "listing the keys under '" + prefix + "' gave more than " +
                                                  std::to_string(kMaxListedKeys) + " keys; not read further"});
    } while (cursor != "0");
    std::sort(keys.begin(), keys.end());  // SCAN may return a key twice
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return A::hit(std::move(keys));
  }

 private:
  static Fault unexpected(const Reply& r) {
    if (r.type() == Reply::Type::error) return error_fault(r.text());
    return {Failure::server, "unexpected reply type"};
  }

  // Runs the commands on the connection (made on first use); a fault
  // instead of replies when the remote is down or the call failed.
  std::optional<Fault> run(const std::vector<Command>& cmds, std::vector<Reply>* replies) {
    std::lock_guard lock(mu_);
    if (down_) {
      Fault again = *down_;
      again.repeated = true;
      return again;
    }
    try {
      if (!conn_) {
        ReplyLimits limits;
        limits.max_string = config().max_object_bytes + kReplySlackBytes;
        conn_.emplace(config().endpoint, config().connect_timeout_s, config().timeout_s, limits);
      }
      *replies = conn_->run(cmds, config().timeout_s);
    } catch (const RedisError& e) {
      conn_.reset();
      Fault f{e.kind(), e.what()};
      if (connection_level(e.kind())) down_ = f;
      return f;
    } catch (const std::bad_alloc&) {  // the process is short of memory: the remote waits, the job goes on
      replies->clear();
      conn_.reset();
      down_ = Fault{Failure::dropped, "out of memory while talking to the server; the connection is dropped"};
      return down_;
    }
    // A command refused for the connection's sake (NOAUTH) ends it too.
    for (const Reply& r : *replies)
      if (r.type() == Reply::Type::error) {
        Fault f = error_fault(r.text());
        if (f.kind == Failure::auth) {
          down_ = f;
          conn_.reset();
          return f;
        }
      }
    return std::nullopt;
  }

  template <class T, class F>
  Answer<T> one(const Command& c, F&& interpret) {
    std::vector<Reply> replies;
    if (auto f = run({c}, &replies)) return Answer<T>::failed(*f);
    Reply& r = replies.front();
    return interpret(r);
  }

  std::mutex mu_;
  std::optional<RedisConnection> conn_;
  std::optional<Fault> down_;
};

}  // namespace

std::unique_ptr<Backend> make_redis_backend(const Config& config) { return std::make_unique<RedisBackend>(config); }

}  // namespace npucache::remote
