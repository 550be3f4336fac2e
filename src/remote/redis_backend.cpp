// The Redis backend (backend.h): one lazily made connection, commands
// mapped to the Backend calls, error replies and connection failures turned
// into typed answers.
#include "remote/backend.h"
#include "remote/redis.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

namespace npucache::remote {
namespace {

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

  Answer<Referenced> get_referenced(const std::string& key, std::size_t at, std::size_t len,
                                    const std::string& prefix) override {
    using A = Answer<Referenced>;
    if (scripts_) {
      // Follows the reference on the server: one round trip. `no-writes`
      // lets it run on a full server (Redis 7); a server that refuses the
      // script (Redis 6, scripting disabled) gets two gets from then on.
      static constexpr std::string_view kScript =
          "#!lua flags=no-writes\n"
          "local v = redis.call('GET', KEYS[1])\n"
          "if not v then return false end\n"
          "local at, n = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
          "local h = string.sub(v, at + 1, at + n)\n"
          "if #h ~= n or not string.match(h, '^[0-9a-f]+$') then return {v} end\n"
          "if redis.call('STRLEN', ARGV[3] .. h) > tonumber(ARGV[4]) then return {v, false, 1} end\n"
          "return {v, redis.call('GET', ARGV[3] .. h)}\n";
      const std::string a = std::to_string(at), n = std::to_string(len), inline_max = std::to_string(kInlineMax);
      std::vector<Reply> replies;
      if (auto f = run({{"EVAL", kScript, "1", key, a, n, prefix, inline_max}}, &replies)) return A::failed(*f);
      Reply& r = replies.front();
      if (r.type() == Reply::Type::nil) return A::miss();
      if (r.type() == Reply::Type::array && r.size() >= 1 && r.type_at(0) == Reply::Type::string) {
        Referenced out{r.take_text_at(0), std::nullopt};
        if (r.size() >= 2 && r.type_at(1) == Reply::Type::string) out.target = r.take_text_at(1);
        if (r.size() == 3) {  // too large to pass through the script: a plain get
          auto t = get(prefix + out.value.substr(at, len));
          if (t.is_failure()) return A::failed(t.fault());
          if (t.is_hit()) out.target = std::move(t.value());
        }
        return A::hit(std::move(out));
      }
      if (r.type() != Reply::Type::error) return A::failed(unexpected(r));
      scripts_ = false;
    }
    auto v = get(key);
    if (!v.is_hit()) return v.is_miss() ? A::miss() : A::failed(v.fault());
    Referenced out{std::move(v.value()), std::nullopt};
    if (out.value.size() >= at + len) {
      const std::string name = out.value.substr(at, len);
      if (name.find_first_not_of("0123456789abcdef") == std::string::npos) {
        auto t = get(prefix + name);
        if (t.is_failure()) return A::failed(t.fault());
        if (t.is_hit()) out.target = std::move(t.value());
      }
    }
    return A::hit(std::move(out));
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

  Answer<std::string> hash_get(const std::string& key, const std::string& field) override {
    return one<std::string>({"HGET", key, field}, [](Reply& r) -> Answer<std::string> {
      if (r.type() == Reply::Type::nil) return Answer<std::string>::miss();
      if (r.type() != Reply::Type::string) return Answer<std::string>::failed(unexpected(r));
      return Answer<std::string>::hit(r.take_text());
    });
  }

  Answer<Fields> hash_all(const std::string& key) override {
    return one<Fields>({"HGETALL", key}, [](const Reply& r) -> Answer<Fields> {
      if (r.type() != Reply::Type::array || r.size() % 2 != 0) return Answer<Fields>::failed(unexpected(r));
      if (r.size() == 0) return Answer<Fields>::miss();
      Fields f;
      for (std::size_t i = 0; i + 1 < r.size(); i += 2)
        f.emplace_back(std::string(r.text_at(i)), std::string(r.text_at(i + 1)));
      return Answer<Fields>::hit(std::move(f));
    });
  }

  Answer<std::size_t> hash_put(const std::string& key, const Fields& fields, Overwrite overwrite) override {
    if (fields.empty()) return Answer<std::size_t>::hit(0);
    std::vector<Command> cmds;
    for (const auto& [f, v] : fields) cmds.push_back({overwrite == Overwrite::no ? "HSETNX" : "HSET", key, f, v});
    std::vector<Reply> replies;
    if (auto f = run(cmds, &replies)) return Answer<std::size_t>::failed(*f);
    std::size_t written = 0;
    for (const Reply& r : replies) {
      if (r.type() != Reply::Type::integer) return Answer<std::size_t>::failed(unexpected(r));
      written += r.integer() > 0 ? 1 : 0;
    }
    return Answer<std::size_t>::hit(overwrite == Overwrite::yes ? fields.size() : written);
  }

  Answer<bool> set_add(const std::string& key, const std::string& member) override {
    return one<bool>({"SADD", key, member}, [](const Reply& r) -> Answer<bool> {
      if (r.type() != Reply::Type::integer) return Answer<bool>::failed(unexpected(r));
      return Answer<bool>::hit(r.integer() > 0);
    });
  }

  Answer<std::vector<std::string>> set_members(const std::string& key) override {
    using A = Answer<std::vector<std::string>>;
    return one<std::vector<std::string>>({"SMEMBERS", key}, [](const Reply& r) -> A {
      if (r.type() != Reply::Type::array) return A::failed(unexpected(r));
      if (r.size() == 0) return A::miss();
      std::vector<std::string> m;
      for (std::size_t i = 0; i < r.size(); ++i) m.emplace_back(r.text_at(i));
      return A::hit(std::move(m));
    });
  }

  Answer<std::vector<std::size_t>> sizes(const std::vector<std::string>& keys) override {
    using A = Answer<std::vector<std::size_t>>;
    std::vector<Command> cmds;
    for (const auto& k : keys) cmds.push_back({"STRLEN", k});
    std::vector<Reply> replies;
    if (keys.empty()) return A::hit({});
    if (auto f = run(cmds, &replies)) return A::failed(*f);
    std::vector<std::size_t> out;
    for (const Reply& r : replies) {
      if (r.type() != Reply::Type::integer) return A::failed(unexpected(r));
      out.push_back(static_cast<std::size_t>(std::max(0LL, r.integer())));
    }
    return A::hit(std::move(out));
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
      if (!conn_) conn_.emplace(config().endpoint, config().connect_timeout_s, config().timeout_s);
      *replies = conn_->run(cmds, config().timeout_s);
    } catch (const RedisError& e) {
      conn_.reset();
      Fault f{e.kind(), e.what()};
      if (connection_level(e.kind())) down_ = f;
      return f;
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

  // Values up to this size come back through the script; a script copies
  // what it returns (into Lua and out again), which costs more than a
  // second round trip for larger ones (perf/bench_remote).
  static constexpr std::size_t kInlineMax = std::size_t{32} << 10;
  std::atomic<bool> scripts_{true};  // the server runs the reference-following script
  std::mutex mu_;
  std::optional<RedisConnection> conn_;
  std::optional<Fault> down_;
};

}  // namespace

std::string_view failure_name(Failure f) {
  switch (f) {
    case Failure::refused: return "refused";
    case Failure::timeout: return "timeout";
    case Failure::auth: return "auth";
    case Failure::full: return "full";
    case Failure::dropped: return "dropped";
    case Failure::server: return "server";
    case Failure::corrupt: return "corrupt";
    case Failure::too_large: return "too_large";
  }
  return "unknown";
}

std::unique_ptr<Backend> make_redis_backend(const Config& config) { return std::make_unique<RedisBackend>(config); }

}  // namespace npucache::remote
