// Running commands from tests: a shell command's exit status and combined
// output; a file's bytes.
#pragma once

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace npucache::testing_support {

struct Out {
  int status = 0;
  std::string text;
};

inline Out sh(const std::string& cmd) {
  Out o;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {127, "popen failed"};
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p)) o.text += buf.data();
  const int st = ::pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

inline bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// A file's bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace npucache::testing_support
