// The zstd wrapper (src/zstd/zstd_codec.h): frames round-trip and carry
// their size; a truncated, corrupt or oversized frame is a CacheError that
// names the problem, decided before anything is allocated; the raw-buffer
// forms the HDF5 filter uses answer 0 instead of throwing.
#include "format/cache_error.h"
#include "zstd/zstd_codec.h"

#include <gtest/gtest.h>

#include <string>

using namespace npucache;

namespace {

std::string sample(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 97) % 251);
  return s;
}

}  // namespace

TEST(ZstdCodec, FramesRoundTripAndRecordTheirSize) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{1} << 20}) {
    const std::string raw = sample(n);
    const std::string frame = zstd::compress(raw);
    EXPECT_EQ(zstd::decompress(frame, n), raw) << n;
    EXPECT_EQ(zstd::frame_length(frame.data(), frame.size()), frame.size()) << n;
    if (n > 0) {
      EXPECT_EQ(zstd::frame_size(frame.data(), frame.size()), n) << n;
    }
  }
}

TEST(ZstdCodec, DamagedOrOversizedFramesAreCacheErrors) {
  const std::string raw = sample(10000), frame = zstd::compress(raw);
  // More than the caller allows: refused from the header.
  EXPECT_THROW(zstd::decompress(frame, raw.size() - 1), npucache::CacheError);
  EXPECT_THROW(zstd::decompress(frame.substr(0, frame.size() / 2), raw.size()), npucache::CacheError);
  EXPECT_THROW(zstd::decompress("", raw.size()), npucache::CacheError);
  EXPECT_THROW(zstd::decompress("not a zstd frame at all", raw.size()), npucache::CacheError);
  // A flipped byte of the payload or checksum never decodes to other bytes.
  for (std::size_t at = frame.size() / 2; at < frame.size(); at += 5) {
    std::string bad = frame;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    try {
      EXPECT_EQ(zstd::decompress(bad, raw.size()), raw) << "offset " << at;
    } catch (const npucache::CacheError&) {
    }
  }
}

TEST(ZstdCodec, RawBufferFormsAnswerZeroOnFailure) {
  const std::string raw = sample(5000);
  std::string dst(zstd::bound(raw.size()), '\0');
  const std::size_t n = zstd::compress_into(raw.data(), raw.size(), dst.data(), dst.size(), zstd::kLevel);
  ASSERT_GT(n, 0u);
  std::string back(raw.size(), '\0');
  EXPECT_EQ(zstd::decompress_into(dst.data(), n, back.data(), back.size()), raw.size());
  EXPECT_EQ(back, raw);
  // Too little room, a cut frame, garbage: 0, never an exception.
  EXPECT_EQ(zstd::decompress_into(dst.data(), n, back.data(), raw.size() - 1), 0u);
  EXPECT_EQ(zstd::decompress_into(dst.data(), n / 2, back.data(), back.size()), 0u);
  EXPECT_EQ(zstd::frame_length(dst.data(), n / 2), 0u);
  EXPECT_EQ(zstd::frame_size("garbage", 7), 0u);
  EXPECT_EQ(zstd::compress_into(raw.data(), raw.size(), dst.data(), 4, zstd::kLevel), 0u);
}
