#include "process/env.h"

#include <chrono>

namespace npucache::process {

double Env::monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Env::wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::shared_ptr<Env> default_env() {
  static const std::shared_ptr<Env> env = std::make_shared<Env>();
  return env;
}

}  // namespace npucache::process
