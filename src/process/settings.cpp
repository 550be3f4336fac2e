#include "process/settings.h"

#include <npucache/error.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

namespace npucache::process {
namespace {

constexpr const char* kFileName = "npucache.conf";

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string normal_key(std::string key) {
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string keys_list(bool cache_dir_file) {
  std::string list;
  for (const auto& s : setting_infos())
    if (!cache_dir_file || s.in_cache_dir) list += (list.empty() ? "" : ", ") + std::string(s.key);
  return list;
}

// Empty when `value` is good for `key`, else what is wrong.
std::string check_value(const std::string& key, const std::string& value) {
  if (key == "log_level") {
    static const char* kLevels[] = {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"};
    for (const char* l : kLevels)
      if (value == l) return {};
    return "'" + value + "' is not a log level: give trace, debug, info, warn, error, critical or off";
  }
  if (key == "max_size") {
    if (value == "none") return {};
    try {
      parse_size(value);
    } catch (const std::exception& e) {
      return e.what() + std::string(", or none");
    }
    return {};
  }
  if (key == "cache_dir" && value.empty()) return "an empty cache directory: give a path, or remove the line";
  return {};
}

std::string expand_home(const std::string& v) {
  if (v.rfind("~/", 0) != 0) return v;
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + v.substr(1) : v;
}

const char* env_value(const SettingInfo& s) {
  const char* v = std::getenv(s.env);
  return v && *v ? v : nullptr;
}

}  // namespace

const std::vector<SettingInfo>& setting_infos() {
  // Never destroyed: a commit finishing while the process exits reads it.
  static const auto* kSettings = new std::vector<SettingInfo>{
      {"cache_dir", "NPUCACHE_CACHE_DIR", ".npucache", false, "the cache directory"},
      {"remote", "NPUCACHE_REMOTE", "", false, "the remote tier: redis://host:port, file:///dir, ... (none: off)"},
      {"log_level", "NPUCACHE_LOG_LEVEL", "info", false, "trace, debug, info, warn, error, critical or off"},
      {"log_file", "NPUCACHE_LOG_FILE", "", false, "append the log to this file instead of stderr"},
      {"max_size", "NPUCACHE_MAX_SIZE", "none", true, "the size limit of a cache's objects (64M, 5G, none)"},
  };
  return *kSettings;
}

const SettingInfo* find_setting(const std::string& key) {
  const std::string k = normal_key(key);
  for (const auto& s : setting_infos())
    if (k == s.key) return &s;
  return nullptr;
}

std::string user_config_path() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x)
    return (std::filesystem::path(x) / "npucache" / kFileName).string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (std::filesystem::path(h) / ".config" / "npucache" / kFileName).string();
  return {};
}

std::string cache_config_path(const std::string& cache_dir) {
  return (std::filesystem::path(cache_dir) / kFileName).string();
}

std::vector<Setting> parse_config(const std::string& text, const std::string& path, bool cache_dir_file) {
  std::vector<Setting> out;
  std::istringstream f(text);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    const std::string where = path + ":" + std::to_string(n);
    if (line.size() > kMaxConfigLineBytes)
      throw ConfigError(where + ": a line of " + std::to_string(line.size()) +
                        " characters, longer than a setting's (at most " + std::to_string(kMaxConfigLineBytes) +
                        "): this is not a settings file; fix or remove it");
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos)
      throw ConfigError(where + ": '" + t + "' is not a setting: write `key = value` (the keys: " +
                        keys_list(cache_dir_file) + "), or start the line with # to make it a comment");
    const std::string key = normal_key(trim(t.substr(0, eq)));
    const std::string value = trim(t.substr(eq + 1));
    const SettingInfo* s = find_setting(key);
    if (!s)
      throw ConfigError(where + ": unknown setting '" + key + "'; the settings are: " + keys_list(cache_dir_file) +
                        " (npucache config --show lists them with their values)");
    if (cache_dir_file && !s->in_cache_dir)
      throw ConfigError(where + ": '" + key + "' cannot be set in a cache directory's " + kFileName +
                        " (it holds only the cache's own settings: " + keys_list(true) + "); set it in " +
                        (user_config_path().empty() ? std::string("the user's npucache.conf") : user_config_path()) +
                        " or with " + s->env);
    if (const std::string bad = check_value(key, value); !bad.empty())
      throw ConfigError(where + ": " + key + ": " + bad);
    out.push_back({key, key == "cache_dir" || key == "log_file" ? expand_home(value) : value, where});
  }
  return out;
}

std::vector<Setting> read_config_file(const std::string& path) {
  if (path.empty()) return {};
  // Not through the Env: the user's file is not the store's. O_NONBLOCK:
  // opening a FIFO does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};  // no file (an unreadable one too: the defaults hold)
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return {};
  if (!S_ISREG(st.st_mode))
    throw ConfigError(path +
                      " is not a regular file (a directory, a FIFO or a device): npucache reads its settings "
                      "from a regular file; replace it with one, or remove it");
  const auto too_large = [&](std::size_t bytes) {
    return ConfigError(path + " is " + std::to_string(bytes) + " bytes, more than a settings file can be (" +
                       std::to_string(kMaxConfigFileBytes) + "): it is not one; fix or remove it");
  };
  if (static_cast<std::size_t>(st.st_size) > kMaxConfigFileBytes) throw too_large(static_cast<std::size_t>(st.st_size));
  // At most one byte over the bound, should the file grow while it is read.
  std::string text(kMaxConfigFileBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = ::read(fd, text.data() + got, text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      throw ConfigError("cannot read " + path + ": " + std::strerror(errno) + "; fix its permissions or remove it");
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  if (got > kMaxConfigFileBytes) throw too_large(got);
  text.resize(got);
  return parse_config(text, path, false);
}

Setting setting(const std::string& key) {
  const SettingInfo* s = find_setting(key);
  if (!s) throw ConfigError("unknown setting '" + key + "'; the settings are: " + keys_list(false));
  if (const char* v = env_value(*s)) return {s->key, v, std::string("environment ") + s->env};
  Setting out{s->key, s->default_value, "default"};
  for (auto& f : read_config_file(user_config_path()))
    if (f.key == out.key) out = std::move(f);  // the last line of a key wins
  if (out.value == "none" && out.key != "max_size") out.value.clear();
  return out;
}

std::optional<std::size_t> max_size_setting(const std::string& cache_dir, const std::optional<std::string>& cache_file,
                                            const std::optional<std::size_t>& legacy, std::string* source) {
  const SettingInfo& info = *find_setting("max_size");
  std::string value, from;
  if (const char* v = env_value(info)) {
    value = v;
    from = std::string("environment ") + info.env;
    if (const std::string bad = check_value("max_size", value); !bad.empty())
      throw ConfigError(std::string(info.env) + ": " + bad);
  } else {
    if (cache_file)
      for (const auto& f : parse_config(*cache_file, cache_config_path(cache_dir), true)) {
        value = f.value;
        from = f.source;
      }
    if (from.empty() && legacy) {
      if (source) *source = (std::filesystem::path(cache_dir) / "config.json").string();
      return legacy;
    }
    if (from.empty()) {
      const Setting s = setting("max_size");
      value = s.value;
      from = s.source;
    }
  }
  if (source) *source = from;
  if (value == "none" || value.empty()) return std::nullopt;
  return parse_size(value);
}

std::string with_max_size(const std::string& old_text, std::optional<std::size_t> limit) {
  const std::string line = "max_size = " + (limit ? size_setting_text(*limit) : std::string("none"));
  std::istringstream in(old_text);
  std::string out, l;
  bool done = false;
  while (std::getline(in, l)) {
    const std::string t = trim(l);
    const auto eq = t.find('=');
    if (!t.empty() && t[0] != '#' && eq != std::string::npos && normal_key(trim(t.substr(0, eq))) == "max_size") {
      if (done) continue;
      l = line;
      done = true;
    }
    out += l + "\n";
  }
  if (old_text.empty()) out = "# The settings of this cache (npucache config --show lists every setting).\n";
  if (!done) out += line + "\n";
  return out;
}

std::size_t parse_size(const std::string& text) {
  auto bad = [&]() {
    return ConfigError("size '" + text +
                       "' is not a size: give a number of bytes with an optional unit K, M, G or T "
                       "(powers of 1024), e.g. 64M or 1.5G");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string unit = text.substr(i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".") throw bad();
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const auto* units = new std::map<std::string, double>{
      {"", 1.0},       {"B", 1.0},     {"K", 0x1p10},   {"KB", 0x1p10}, {"KIB", 0x1p10},
      {"M", 0x1p20},   {"MB", 0x1p20}, {"MIB", 0x1p20}, {"G", 0x1p30},  {"GB", 0x1p30},
      {"GIB", 0x1p30}, {"T", 0x1p40},  {"TB", 0x1p40},  {"TIB", 0x1p40}};
  auto u = units->find(unit);
  if (u == units->end()) throw bad();
  // from_chars: the C locale's '.', whatever the process's locale. A
  // number beyond a double's range is too large (out of range below), or
  // too small to be a byte.
  double mantissa = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), mantissa);
  if (error == std::errc::result_out_of_range)
    mantissa = number.find_first_not_of("0.") < number.find('.') ? HUGE_VAL : 0.0;
  else if (error != std::errc() || end != number.data() + number.size())
    throw bad();
  const double v = mantissa * u->second;
  if (!std::isfinite(v) || v < 0 || v >= 0x1p62)
    throw ConfigError("size '" + text + "' is out of range (at most 4 EiB)");
  return static_cast<std::size_t>(v);
}

std::string size_setting_text(std::size_t bytes) {
  static const std::pair<std::size_t, const char*> kUnits[] = {{std::size_t{1} << 40, "T"},
                                                               {std::size_t{1} << 30, "G"},
                                                               {std::size_t{1} << 20, "M"},
                                                               {std::size_t{1} << 10, "K"}};
  for (const auto& [unit, name] : kUnits)
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + name;
  return std::to_string(bytes);
}

}  // namespace npucache::process
