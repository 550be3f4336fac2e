// Subcommands of the `npucache` command; each registers itself on the app
// and records its exit status.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <memory>
#include <string>

namespace npucache::tools {

// A check for whole-number options (--tp, --tokens...): "--tp: 'x' is not a
// positive whole number" instead of the parser's range message.
inline CLI::Validator positive_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        long long v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v <= 0)
          return "'" + s + "' is not a positive whole number";
        return {};
      },
      "POSITIVE");
}

void add_generate_command(CLI::App& app);
void add_cache_commands(CLI::App& app);
void add_job_commands(CLI::App& app);
void add_remote_commands(CLI::App& app);

// The cache directory a command was given, or the default one
// (default_cache_dir(): NPUCACHE_CACHE_DIR, else the user's npucache.conf,
// else .npucache).
std::string dir_or_default(const std::string& dir);

// How every cache command takes its cache directory: --cache-dir D, and
// (where the command took one before) a positional DIR, the same.
struct CacheDirArg {
  std::string positional, option;
  // The directory given ("" when none): both given and different is a
  // ConfigError naming the two.
  std::string given() const;
};
// Adds --cache-dir (and, with `positional`, the positional `dir`) to `cmd`.
std::shared_ptr<CacheDirArg> add_cache_dir(CLI::App* cmd, bool positional = true);

int exit_code();
void set_exit_code(int code);

}  // namespace npucache::tools
