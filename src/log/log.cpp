#include "log/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace npucache::log {
namespace {

// %* : the level as the seed's logs spell it (INFO, WARNING, ...).
class UpperLevel final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "OFF"};
    const std::string_view name = kNames[static_cast<int>(msg.level)];
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<UpperLevel>(); }
};

}  // namespace

spdlog::logger& get() {
  // Never destroyed: statistics are flushed by static destructors at exit,
  // which may log after other statics are gone.
  static spdlog::logger* logger = new spdlog::logger(*[] {
    auto l = spdlog::get("npucache");
    if (!l) {
      // Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
      const char* no_color = std::getenv("NO_COLOR");
      l = spdlog::stderr_color_mt("npucache",
                                  no_color && *no_color ? spdlog::color_mode::never : spdlog::color_mode::automatic);
    }
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<UpperLevel>('*').set_pattern("[%^%*%$] NPUCACHE %Y-%m-%d %H:%M:%S %v");
    l->set_formatter(std::move(formatter));
    spdlog::level::level_enum level = spdlog::level::info;
    std::string bad;
    if (const char* v = std::getenv("NPUCACHE_LOG_LEVEL"); v && *v) {
      const std::string s(v);
      const auto parsed = spdlog::level::from_str(s == "warning" ? "warn" : s);
      if (parsed == spdlog::level::off && s != "off")
        bad = s;
      else
        level = parsed;
    }
    l->set_level(level);
    // A typo in the level must not stop a job: the default, and a warning.
    if (!bad.empty())
      l->warn("NPUCACHE_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); using info",
              bad);
    return l;
  }());
  return *logger;
}

}  // namespace npucache::log
