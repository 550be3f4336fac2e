// The HDF5 zstd filter, registered filter id 32015 ("Zstandard"), as the
// community HDF5 plugin defines it: cd_values[0], when present, is the
// compression level. The same code serves the library (registered in
// process) and the loadable plugin libh5zzstd.so (HDF5_PLUGIN_PATH), so
// h5dump and other HDF5 tools decode npucache's artifacts.
#pragma once

#include <hdf5.h>

#include <cstddef>

namespace npucache::h5 {

constexpr H5Z_filter_t kZstdFilterId = 32015;
// The chunk size npucache writes (4 MiB) with a wide margin for other
// writers: a frame claiming more decompressed bytes is refused.
constexpr std::size_t kMaxChunkBytes = std::size_t{64} << 20;

// The filter class (name "zstd").
const H5Z_class2_t* zstd_filter_class();
// Registers the filter with this process's HDF5 library (idempotent).
void register_zstd_filter();

}  // namespace npucache::h5
