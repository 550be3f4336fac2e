// The project's logger: spdlog, logger name "npucache", level from
// NPUCACHE_LOG_LEVEL (trace, debug, info, warn or warning, error, critical,
// off; default info; anything else is a warning and the default). Lines go
// to stderr in the seed's format, "[INFO] NPUCACHE 2026-11-22 14:48:18
// message"; the level is coloured on a terminal unless NO_COLOR is set.
#pragma once

#include <spdlog/spdlog.h>

namespace npucache::log {

spdlog::logger& get();

// Erases a progress line (progress.h) drawn on the terminal, so a log line
// starts at the beginning of a line; cheap when there is none.
void clear_progress_line();

template <class... A>
void info(spdlog::format_string_t<A...> fmt, A&&... args) {
  clear_progress_line();
  get().info(fmt, std::forward<A>(args)...);
}
template <class... A>
void warn(spdlog::format_string_t<A...> fmt, A&&... args) {
  clear_progress_line();
  get().warn(fmt, std::forward<A>(args)...);
}
template <class... A>
void debug(spdlog::format_string_t<A...> fmt, A&&... args) {
  clear_progress_line();
  get().debug(fmt, std::forward<A>(args)...);
}
template <class... A>
void error(spdlog::format_string_t<A...> fmt, A&&... args) {
  clear_progress_line();
  get().error(fmt, std::forward<A>(args)...);
}

}  // namespace npucache::log
