#include "zstd/zstd_codec.h"

#include <npucache/error.h>

#include <zstd.h>

#include <memory>

namespace npucache::zstd {
namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

ZSTD_CCtx* cctx(int level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> c(ZSTD_createCCtx());
  if (!c) throw CacheError("zstd: cannot create a compression context (out of memory)");
  ZSTD_CCtx_reset(c.get(), ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_contentSizeFlag, 1);
  return c.get();
}

ZSTD_DCtx* dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> d(ZSTD_createDCtx());
  if (!d) throw CacheError("zstd: cannot create a decompression context (out of memory)");
  return d.get();
}

}  // namespace

std::size_t bound(std::size_t n) { return ZSTD_compressBound(n); }

std::size_t compress_into(const void* src, std::size_t n, void* dst, std::size_t cap, int level) {
  try {
    std::size_t r = ZSTD_compress2(cctx(level), dst, cap, src, n);
    return ZSTD_isError(r) ? 0 : r;
  } catch (...) {
    return 0;
  }
}

std::size_t frame_size(const void* src, std::size_t n) {
  unsigned long long s = ZSTD_getFrameContentSize(src, n);
  if (s == ZSTD_CONTENTSIZE_ERROR || s == ZSTD_CONTENTSIZE_UNKNOWN) return 0;
  return static_cast<std::size_t>(s);
}

std::size_t frame_length(const void* src, std::size_t n) {
  const std::size_t r = ZSTD_findFrameCompressedSize(src, n);
  return ZSTD_isError(r) ? 0 : r;
}

std::size_t decompress_into(const void* src, std::size_t n, void* dst, std::size_t cap) {
  try {
    std::size_t r = ZSTD_decompressDCtx(dctx(), dst, cap, src, n);
    return ZSTD_isError(r) ? 0 : r;
  } catch (...) {
    return 0;
  }
}

std::string compress(std::string_view raw, int level) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  std::size_t r = ZSTD_compress2(cctx(level), out.data(), out.size(), raw.data(), raw.size());
  if (ZSTD_isError(r)) throw CacheError(std::string("zstd compression failed: ") + ZSTD_getErrorName(r));
  out.resize(r);
  return out;
}

std::string decompress(std::string_view frame, std::size_t max_bytes) {
  unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) throw CacheError("zstd: the data is not a zstd frame (corrupt)");
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) throw CacheError("zstd: the frame does not record its size");
  if (size > max_bytes)
    throw CacheError("zstd: the frame claims " + std::to_string(size) + " bytes, more than the " +
                     std::to_string(max_bytes) + " it may hold");
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t r = ZSTD_decompressDCtx(dctx(), out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(r)) throw CacheError(std::string("zstd decompression failed: ") + ZSTD_getErrorName(r));
  if (r != out.size()) throw CacheError("zstd: the frame is truncated");
  return out;
}

}  // namespace npucache::zstd
