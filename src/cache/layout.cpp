#include "cache/layout.h"

#include <atomic>
#include <cstdlib>
#include <unistd.h>

namespace npucache::cache::layout {

std::string entry_path(const std::string& model_info, const std::string& func, int world_size, int global_rank) {
  if (world_size > 1)
    return model_info + "/world" + std::to_string(world_size) + "global_rank" + std::to_string(global_rank) + "/" + func;
  return model_info + "/" + func;
}

std::string h5_entry(const std::string& entry_path) {
  return entry_path.empty() || entry_path[0] != '/' ? "/" + entry_path : entry_path;
}

std::string h5_object(const std::string& graph_key) { return std::string(kObjectsGroup) + "/" + graph_key; }

std::string temp_name(const std::string& final_name) {
  static std::atomic<unsigned> n{0};
  return "." + final_name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n++);
}

long temp_owner(const std::string& name, const std::string& final_name) {
  const std::string prefix = "." + final_name + ".tmp.";
  if (name.rfind(prefix, 0) != 0) return -1;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
  return end && *end == '.' && pid > 0 ? pid : -1;
}

}  // namespace npucache::cache::layout
