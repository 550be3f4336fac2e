// The project's logger: spdlog, logger name "npucache", level from
// NPUCACHE_LOG_LEVEL (trace, debug, info, warn or warning, error, critical,
// off; default info; anything else is a warning and the default). Lines go
// to stderr in the seed's format, "[INFO] NPUCACHE 2026-11-22 14:48:18
// message"; the level is coloured on a terminal unless NO_COLOR is set.
#pragma once

#include <spdlog/spdlog.h>

namespace npucache::log {

spdlog::logger& get();

template <class... A>
void info(spdlog::format_string_t<A...> fmt, A&&... args) { get().info(fmt, std::forward<A>(args)...); }
template <class... A>
void warn(spdlog::format_string_t<A...> fmt, A&&... args) { get().warn(fmt, std::forward<A>(args)...); }
template <class... A>
void debug(spdlog::format_string_t<A...> fmt, A&&... args) { get().debug(fmt, std::forward<A>(args)...); }
template <class... A>
void error(spdlog::format_string_t<A...> fmt, A&&... args) { get().error(fmt, std::forward<A>(args)...); }

}  // namespace npucache::log
