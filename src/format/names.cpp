#include "format/names.h"

#include <array>
#include <optional>

#include <unistd.h>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <random>
#include <string_view>

namespace npucache::format::names {

std::string entry_path(const std::string& model_info, const std::string& func, int world_size, int global_rank) {
  if (world_size > 1)
    return model_info + "/world" + std::to_string(world_size) + "global_rank" + std::to_string(global_rank) + "/" +
           func;
  return model_info + "/" + func;
}

namespace {

// "X.Y.Z" as three numbers (each at most 9 digits); nullopt for anything else.
std::optional<std::array<long, 3>> format_numbers(const std::string& v) {
  std::array<long, 3> out{};
  std::size_t at = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    std::size_t end = at;
    while (end < v.size() && end - at < 9 && v[end] >= '0' && v[end] <= '9') ++end;
    if (end == at) return std::nullopt;
    out[i] = std::stol(v.substr(at, end - at));
    if (i < 2 && (end >= v.size() || v[end] != '.')) return std::nullopt;
    at = end + (i < 2 ? 1 : 0);
  }
  if (at != v.size()) return std::nullopt;
  return out;
}

}  // namespace

std::string key_text(std::initializer_list<std::string_view> fields) {
  std::string s;
  for (const std::string_view f : fields) {
    s += std::to_string(f.size());
    s += ':';
    s += f;
    s += '|';
  }
  return s;
}

bool later_format(const std::string& version) {
  const auto v = format_numbers(version), ours = format_numbers(kFormatVersion);
  return v && ours && *v > *ours;
}

bool earlier_format(const std::string& version) {
  const auto v = format_numbers(version), ours = format_numbers(kFormatVersion);
  return v && ours && *v < *ours;
}

std::string model_info_of(const std::string& entry_path) { return entry_path.substr(0, entry_path.find('/')); }

std::string index_file(const std::string& model_info) { return model_info + kIndexSuffix; }
std::string object_file(const std::string& graph_key) { return graph_key + ".h5"; }

std::string index_model_info(const std::string& file_name) {
  const std::string suffix = kIndexSuffix;
  if (file_name.size() <= suffix.size() ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string m = file_name.substr(0, file_name.size() - suffix.size());
  return valid_name(m) && file_name != kFormat1File && file_name != kTuningFile && file_name != kProfileFile ? m : "";
}

std::string delta_file(const std::string& model_info, uint64_t first) {
  return model_info + "." + std::to_string(first) + kIndexSuffix;
}

std::pair<std::string, uint64_t> delta_of(const std::string& file_name) {
  const std::string suffix = kIndexSuffix;
  if (file_name.size() <= suffix.size() ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {"", 0};
  const std::string stem = file_name.substr(0, file_name.size() - suffix.size());
  const auto dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size() || stem.size() - dot - 1 > 19) return {"", 0};
  uint64_t n = 0;
  for (std::size_t i = dot + 1; i < stem.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(stem[i]))) return {"", 0};
    n = n * 10 + static_cast<uint64_t>(stem[i] - '0');
  }
  const std::string m = stem.substr(0, dot);
  if (!valid_name(m) || n == 0 || stem[dot + 1] == '0') return {"", 0};
  return {m, n};
}

std::string object_key(const std::string& file_name) {
  if (file_name.size() != 35 || file_name.compare(32, 3, ".h5") != 0) return "";
  const std::string k = file_name.substr(0, 32);
  return valid_graph_key(k) ? k : "";
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 255 || s[0] == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

bool valid_graph_key(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
  return true;
}

bool valid_entry_path(const std::string& s) {
  const auto first = s.find('/');
  if (first == std::string::npos) return false;
  const auto last = s.rfind('/');
  if (!valid_name(s.substr(0, first)) || !valid_name(s.substr(last + 1))) return false;
  if (first == last) return true;
  // world[1-9][0-9]{0,8}global_rank(0|[1-9][0-9]{0,8})
  std::string_view mid = std::string_view(s).substr(first + 1, last - first - 1);
  auto number = [&mid](bool zero_ok) {
    std::size_t n = 0;
    while (n < mid.size() && n < 10 && std::isdigit(static_cast<unsigned char>(mid[n]))) ++n;
    const bool ok = n >= 1 && n <= 9 && (mid[0] != '0' || (zero_ok && n == 1));
    mid.remove_prefix(n);
    return ok;
  };
  auto word = [&mid](std::string_view w) {
    if (mid.substr(0, w.size()) != w) return false;
    mid.remove_prefix(w.size());
    return true;
  };
  return word("world") && number(false) && word("global_rank") && number(true) && mid.empty();
}

std::string temp_name(const std::string& final_name) {
  // From a random start: a name planted in a directory others may write
  // in is never opened (O_EXCL|O_NOFOLLOW), and rarely even met.
  static std::atomic<unsigned> n{std::random_device{}() % 1000000000u};
  return "." + final_name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n++);
}

long temp_owner_any(const std::string& name) {
  if (name.empty() || name[0] != '.') return -1;
  const auto at = name.rfind(".tmp.");
  if (at == std::string::npos) return -1;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + at + 5, &end, 10);
  return end && *end == '.' && pid > 0 ? pid : -1;
}

}  // namespace npucache::format::names

namespace npucache::format::names {

std::string template_file(const std::string& template_key) { return template_key + kIndexSuffix; }

std::string template_key_of(const std::string& file_name) {
  const std::string suffix = kIndexSuffix;
  if (file_name.size() <= suffix.size() || file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix))
    return "";
  const std::string k = file_name.substr(0, file_name.size() - suffix.size());
  return valid_template_key(k) ? k : "";
}

bool valid_template_key(const std::string& key) {
  if (key.size() == 32) return valid_graph_key(key);
  if (key.size() != 32 + 1 + 16 || key[32] != '.' || !valid_graph_key(key.substr(0, 32))) return false;
  for (std::size_t i = 33; i < key.size(); ++i)
    if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f'))) return false;
  return true;
}

std::string region_file(const std::string& region_key) { return region_key + kIndexSuffix; }

std::string region_key_of(const std::string& file_name) {
  const std::string suffix = kIndexSuffix;
  if (file_name.size() != 32 + suffix.size() || file_name.compare(32, suffix.size(), suffix)) return "";
  const std::string k = file_name.substr(0, 32);
  return valid_graph_key(k) ? k : "";
}

}  // namespace npucache::format::names
