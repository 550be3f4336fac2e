// The loadable HDF5 filter plugin (libh5zzstd.so): with HDF5_PLUGIN_PATH
// pointing at its folder, h5dump -d decodes npucache's zstd datasets.
#include "h5/zstd_filter.h"

#include <H5PLextern.h>

extern "C" {
H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }
const void* H5PLget_plugin_info(void) { return npucache::h5::zstd_filter_class(); }
}
