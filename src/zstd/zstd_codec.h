// zstd, wrapped once: RAII contexts, checked calls, frames carrying their
// content size and a checksum.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace npucache::zstd {

// Level 3: zstd's default, a good ratio at several hundred MB/s.
constexpr int kLevel = 3;

std::string compress(std::string_view raw, int level = kLevel);
// Throws CacheError naming the zstd error for a truncated or corrupt frame,
// or when the frame claims more than `max_bytes` (checked before anything
// is allocated).
std::string decompress(std::string_view frame, std::size_t max_bytes);

// Raw-buffer forms for the HDF5 filter: 0 on failure (the filter protocol).
std::size_t compress_into(const void* src, std::size_t n, void* dst, std::size_t cap, int level);
std::size_t bound(std::size_t n);
// Content size recorded in the frame, or 0 when unknown/invalid.
std::size_t frame_size(const void* src, std::size_t n);
std::size_t decompress_into(const void* src, std::size_t n, void* dst, std::size_t cap);
// The length of the frame starting at `src` (at most `n`), or 0 when no
// whole frame starts there.
std::size_t frame_length(const void* src, std::size_t n);

}  // namespace npucache::zstd
