// Where the HDF5 zstd filter plugin (libh5zzstd.so) of this npucache is:
// the folder to put in HDF5_PLUGIN_PATH so that h5dump, h5py and other HDF5
// programs decode the `compiled_module` datasets of a cache.
//
// The folder is found relative to the running `npucache` executable, so a
// moved installation (cmake --install --prefix P, DESTDIR) still finds its
// own plugin: first the installed layout (<bindir>/../<libdir>/npucache/
// hdf5-plugins), then the build tree's (<build>/src/../plugins). Which
// relative paths these are is fixed by the build (src/CMakeLists.txt).
#pragma once

#include <filesystem>

namespace npucache::tools {

// The absolute folder holding the plugin. Throws npucache::Error naming the
// places looked at when the plugin is in neither.
std::filesystem::path hdf5_plugin_dir();

}  // namespace npucache::tools
