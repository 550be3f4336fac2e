#include "log/log.h"

#include <npucache/error.h>

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace npucache::log {

spdlog::logger& get() {
  // Never destroyed: statistics are flushed by static destructors at exit,
  // which may log after other statics are gone.
  static spdlog::logger* logger = new spdlog::logger(*[] {
    auto l = spdlog::get("npucache");
    if (!l) l = spdlog::stderr_color_mt("npucache");
    l->set_pattern("[npucache] [%l] %v");
    spdlog::level::level_enum level = spdlog::level::info;
    if (const char* v = std::getenv("NPUCACHE_LOG_LEVEL"); v && *v) {
      level = spdlog::level::from_str(v);
      if (level == spdlog::level::off && std::string(v) != "off")
        throw ConfigError(std::string("NPUCACHE_LOG_LEVEL='") + v +
                          "' is not a level: use trace, debug, info, warn, error, critical or off");
    }
    l->set_level(level);
    return l;
  }());
  return *logger;
}

}  // namespace npucache::log
