#include "h5/zstd_filter.h"

#include <npucache/error.h>
#include "zstd/zstd_codec.h"

#include <mutex>

namespace npucache::h5 {
namespace {

// The H5Z filter callback: compresses on write, decompresses on read
// (H5Z_FLAG_REVERSE). Buffers belong to HDF5's allocator. Returns the new
// size, 0 on failure (HDF5 then reports a filter error).
size_t zstd_filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[], size_t nbytes,
                   size_t* buf_size, void** buf) {
  if (flags & H5Z_FLAG_REVERSE) {
    // A chunk holds at most kMaxChunkBytes; a frame claiming more is damaged
    // and is refused before anything is allocated.
    const std::size_t out_size = zstd::frame_size(*buf, nbytes);
    if (out_size == 0 || out_size > kMaxChunkBytes) return 0;
    void* out = H5allocate_memory(out_size, false);
    if (out == nullptr) return 0;
    if (zstd::decompress_into(*buf, nbytes, out, out_size) != out_size) {
      H5free_memory(out);
      return 0;
    }
    H5free_memory(*buf);
    *buf = out;
    *buf_size = out_size;
    return out_size;
  }
  const int level = cd_nelmts > 0 ? static_cast<int>(cd_values[0]) : zstd::kLevel;
  const std::size_t cap = zstd::bound(nbytes);
  void* out = H5allocate_memory(cap, false);
  if (out == nullptr) return 0;
  const std::size_t n = zstd::compress_into(*buf, nbytes, out, cap, level);
  if (n == 0) {
    H5free_memory(out);
    return 0;
  }
  H5free_memory(*buf);
  *buf = out;
  *buf_size = cap;
  return n;
}

const H5Z_class2_t kClass = {
    H5Z_CLASS_T_VERS, kZstdFilterId, 1, 1, "zstd", nullptr, nullptr, zstd_filter,
};

}  // namespace

const H5Z_class2_t* zstd_filter_class() { return &kClass; }

void register_zstd_filter() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (H5Zfilter_avail(kZstdFilterId) > 0) return;  // e.g. the plugin was loaded
    if (H5Zregister(&kClass) < 0) throw CacheError("cannot register the HDF5 zstd filter (id 32015)");
  });
}

}  // namespace npucache::h5
