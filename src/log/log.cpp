#include "log/log.h"

#include "process/settings.h"

#include <npucache/error.h>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
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

// A setting of the log (process/settings.h: the environment, the user's
// npucache.conf); a bad file is said in `bad` and the environment alone
// holds.
process::Setting log_setting(const char* key, std::string& bad) {
  try {
    return process::setting(key);
  } catch (const npucache::ConfigError& e) {
    bad = e.what();
    const auto& info = *process::find_setting(key);
    const char* v = std::getenv(info.env);
    if (v && *v) return {key, v, std::string("environment ") + info.env};
    return {key, "", "default"};
  }
}

}  // namespace

spdlog::logger& get() {
  // Never destroyed: statistics are flushed by static destructors at exit,
  // which may log after other statics are gone.
  static spdlog::logger* logger = new spdlog::logger(*[] {
    std::string bad_file, file_error;
    const process::Setting file = log_setting("log_file", bad_file);
    const process::Setting level_setting = log_setting("log_level", bad_file);
    auto l = spdlog::get("npucache");
    if (!l && !file.value.empty()) {
      // NPUCACHE_LOG_FILE / log_file: appended to, by every process alike.
      try {
        l = std::make_shared<spdlog::logger>(
            "npucache", std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.value, /*truncate=*/false));
        l->flush_on(spdlog::level::trace);  // every line, as it is said (a killed rank's too)
        spdlog::register_logger(l);
      } catch (const spdlog::spdlog_ex& e) {
        file_error = e.what();
        l = nullptr;
      }
    }
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
    if (!level_setting.value.empty()) {
      const std::string& s = level_setting.value;
      const auto parsed = spdlog::level::from_str(s == "warning" ? "warn" : s);
      if (parsed == spdlog::level::off && s != "off")
        bad = s;
      else
        level = parsed;
    }
    l->set_level(level);
    // A typo in the level must not stop a job: the default, and a warning.
    // Named by where it came from: NPUCACHE_LOG_LEVEL='x', or the file and line.
    const std::string& from = level_setting.source;
    const std::string who = from.rfind("environment ", 0) == 0 ? from.substr(12) + "='" + bad + "'"
                                                               : "log_level '" + bad + "' (" + from + ")";
    if (!bad.empty()) l->warn("{} is not a level (trace, debug, info, warn, error, critical, off); using info", who);
    if (!bad_file.empty()) l->warn("the log settings of the configuration file are not used: {}", bad_file);
    if (!file_error.empty())
      l->warn("the log cannot go to {} ({}, from {}): it goes to stderr; name a file that can be written", file.value,
              file_error, file.source);
    return l;
  }());
  return *logger;
}

}  // namespace npucache::log
