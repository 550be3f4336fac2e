#include "cache/stats.h"

#include "cache/file_lock.h"
#include "log/log.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <mutex>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace npucache::cache {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kRecentMisses = 20;

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

CacheStats parse(const fs::path& file) {
  CacheStats s;
  std::ifstream in(file);
  if (!in) return s;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return s;
  s.hits = j.value("hits", uint64_t{0});
  s.misses = j.value("misses", uint64_t{0});
  s.saves = j.value("saves", uint64_t{0});
  if (j.contains("last_used") && j["last_used"].is_object())
    for (auto& [k, v] : j["last_used"].items()) s.last_used[k] = v.get<double>();
  if (j.contains("recent_misses") && j["recent_misses"].is_array())
    for (auto& m : j["recent_misses"])
      s.recent_misses.push_back({m.value("time", 0.0), m.value("entry", std::string()), m.value("reason", std::string()),
                                 m.value("differences", std::vector<std::string>{})});
  return s;
}

template <class F>
void update(const fs::path& dir, F&& change) {
  try {
    FileLock lock((dir / ".lock").string());
    CacheStats s = parse(dir / "stats.json");
    change(s);
    nlohmann::json j;
    j["hits"] = s.hits;
    j["misses"] = s.misses;
    j["saves"] = s.saves;
    j["last_used"] = s.last_used;
    j["recent_misses"] = nlohmann::json::array();
    for (const auto& m : s.recent_misses)
      j["recent_misses"].push_back({{"time", m.time}, {"entry", m.entry}, {"reason", m.reason}, {"differences", m.differences}});
    const fs::path tmp = dir / (".stats.json.tmp." + std::to_string(::getpid()));
    {
      std::ofstream out(tmp);
      out << j.dump(1) << "\n";
    }
    ::chmod(tmp.c_str(), 0600);
    fs::rename(tmp, dir / "stats.json");
  } catch (const std::exception& e) {
    log::debug("cache statistics in {} not updated: {}", dir.string(), e.what());
  }
}

// Counters accumulated per cache directory until flushed.
class Pending {
 public:
  ~Pending() { flush(); }
  template <class F>
  void add(const fs::path& dir, F&& f) {
    std::lock_guard lock(mu_);
    f(pending_[dir.string()]);
  }
  void flush() {
    std::map<std::string, CacheStats> todo;
    {
      std::lock_guard lock(mu_);
      todo.swap(pending_);
    }
    for (auto& [dir, p] : todo)
      update(dir, [&](CacheStats& s) {
        s.hits += p.hits;
        s.misses += p.misses;
        s.saves += p.saves;
        for (const auto& [e, t] : p.last_used) s.last_used[e] = t;
        for (auto& m : p.recent_misses) s.recent_misses.push_back(m);
        if (s.recent_misses.size() > kRecentMisses)
          s.recent_misses.erase(s.recent_misses.begin(),
                                s.recent_misses.end() - static_cast<std::ptrdiff_t>(kRecentMisses));
      });
  }

 private:
  std::mutex mu_;
  std::map<std::string, CacheStats> pending_;
};

Pending& pending() {
  static Pending p;
  return p;
}

}  // namespace

CacheStats read_stats(const fs::path& dir) { return parse(dir / "stats.json"); }

void flush_stats() { pending().flush(); }

void record_hit(const fs::path& dir, const std::string& entry) {
  pending().add(dir, [&](CacheStats& s) {
    ++s.hits;
    s.last_used[entry] = now();
  });
}

void record_miss(const fs::path& dir, const MissRecord& miss) {
  pending().add(dir, [&](CacheStats& s) {
    ++s.misses;
    MissRecord m = miss;
    m.time = now();
    s.recent_misses.push_back(std::move(m));
  });
}

void record_save(const fs::path& dir, const std::vector<std::string>& entries) {
  pending().add(dir, [&](CacheStats& s) {
    s.saves += entries.size();
    for (const auto& e : entries) s.last_used[e] = now();
  });
}

void forget_entries(const fs::path& dir, const std::vector<std::string>& entries) {
  update(dir, [&](CacheStats& s) {
    for (const auto& e : entries) s.last_used.erase(e);
  });
}

}  // namespace npucache::cache
