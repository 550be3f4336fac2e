#include "tools/plugin_path.h"

#include <npucache/error.h>

#include <system_error>

namespace npucache::tools {
namespace fs = std::filesystem;

fs::path hdf5_plugin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the npucache executable (/proc/self/exe: " + ec.message() + ")");
  const fs::path bin = exe.parent_path();
  // Absolute when the build was configured with an absolute libdir.
  const fs::path candidates[] = {bin / NPUCACHE_PLUGIN_DIR_INSTALLED, bin / NPUCACHE_PLUGIN_DIR_BUILD};
  for (const fs::path& dir : candidates)
    if (fs::is_regular_file(dir / NPUCACHE_PLUGIN_FILE, ec)) return fs::weakly_canonical(dir);
  throw Error(std::string("the HDF5 zstd plugin (" NPUCACHE_PLUGIN_FILE ") is neither at ") +
              fs::weakly_canonical(candidates[0]).string() + " (installed) nor at " +
              fs::weakly_canonical(candidates[1]).string() +
              " (build tree); install npucache (cmake --install) or build the h5zzstd target");
}

}  // namespace npucache::tools
