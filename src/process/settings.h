// The settings of npucache, as ccache's: each takes its value from (first
// found) the command line, the environment, the cache directory's
// npucache.conf (only the cache's own settings: max_size), the user's
// configuration file, the default. The library reads them too (cache
// directory, remote, log), not only the command line.
//
// The user's file is $XDG_CONFIG_HOME/npucache/npucache.conf, else
// ~/.config/npucache/npucache.conf; the cache's is <cache_dir>/npucache.conf.
// Both are `key = value` lines; `#` starts a comment line; blank lines are
// skipped; a missing file is no settings. An unknown key, a bad value, a
// line that is not `key = value` or one longer than kMaxConfigLineBytes is
// a ConfigError naming the file, the line and what to do; so is a user's
// file that is not a regular file (a FIFO, a device) or larger than
// kMaxConfigFileBytes. The cache's file lies in a directory other users may
// write to (a shared cache): its caller reads it with the rules of the
// cache's other files (storage's Dir::read: no link, no file of another
// user, none that others may write, at most kMaxConfigFileBytes) and gives
// its text here.
//
// Thread safety: every function may be called from any thread (files are
// read on each call: a test or a launcher may change them).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace npucache::process {

// One setting: its key in the files, its environment variable, its default
// as shown, and whether a cache directory's file may set it.
struct SettingInfo {
  const char* key;
  const char* env;
  const char* default_value;
  bool in_cache_dir;
  const char* meaning;
};
// Every setting, in the order `npucache config --show` prints them.
const std::vector<SettingInfo>& setting_infos();
// The setting of `key` (also accepted with '-' for '_'), or nullptr.
const SettingInfo* find_setting(const std::string& key);

// Where a value came from.
struct Setting {
  std::string key;
  std::string value;   // "" for none
  std::string source;  // "default", "<file>:<line>", "environment NPUCACHE_X", "command line"
};

// The user's configuration file (it need not exist; "" without HOME and
// XDG_CONFIG_HOME).
std::string user_config_path();
// The cache directory's own file.
std::string cache_config_path(const std::string& cache_dir);

// The largest settings file, and the longest line of one.
constexpr std::size_t kMaxConfigFileBytes = std::size_t{64} << 10;
constexpr std::size_t kMaxConfigLineBytes = 4096;

// The settings of `text`, the contents of the file `path` (named in
// errors). `cache_dir_file`: only settings a cache directory may hold are
// accepted there.
std::vector<Setting> parse_config(const std::string& text, const std::string& path, bool cache_dir_file);
// The settings of the user's file `path` (none when it does not exist or
// cannot be opened; a link is followed: the file is the user's own). Read
// with the system's calls, not the Env's (it is not the store's: a test's
// faults stay on the store's files), without waiting on a FIFO.
std::vector<Setting> read_config_file(const std::string& path);

// The value of a process-wide setting (cache_dir, remote, log_level,
// log_file): the environment, else the user's file, else the default.
// Empty for none. ConfigError when the user's file is bad.
Setting setting(const std::string& key);

// The size limit of a cache: NPUCACHE_MAX_SIZE, else the cache's
// npucache.conf (`cache_file`: its text, nullopt when it is absent or was
// refused), else `legacy` (the value of the file earlier versions kept it
// in, when given), else the user's file; none ("none" anywhere) is nullopt.
// `source` receives where it came from. ConfigError for a bad setting.
std::optional<std::size_t> max_size_setting(const std::string& cache_dir, const std::optional<std::string>& cache_file,
                                            const std::optional<std::size_t>& legacy, std::string* source = nullptr);

// Rewrites the max_size line of the cache's npucache.conf (keeping its other
// lines and comments) to `limit` (nullopt: none). Returns the new text.
std::string with_max_size(const std::string& old_text, std::optional<std::size_t> limit);

// "64M", "1.5G", "1024", "2KiB": bytes; ConfigError (naming the text) for
// anything else, negative, NaN or too large.
std::size_t parse_size(const std::string& text);
// "64M", "1G" when exact, else the bytes.
std::string size_setting_text(std::size_t bytes);

}  // namespace npucache::process
