// The tuning file's encoding (format/tuning_file.h): what it encodes it
// decodes, and every flipped byte or cut is refused.
#include "compiler/tuning_table.h"
#include "format/cache_error.h"
#include "format/tuning_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace npucache;

TEST(TuningFile, DecodesWhatItEncodesAndRejectsEveryFlippedByte) {
  std::vector<compiler::TuningRecord> rs = {
      {"simnpu-v1 runtime 1.0.0",
       "matmul f32[8, 64] f32[64, 64] trans_b",
       {"tile_m=32 tile_n=256 tile_k=128", 1.5, 2.5, 8, ""}},
      {"simnpu/v2 runtime 2", "fused f32[8] code#12", {"block=256", 0, 0, 0, "not timed: too large"}}};
  const std::string f = cache::encode_tuning(rs);
  EXPECT_EQ(cache::decode_tuning(f, "t"), rs);
  for (std::size_t at = 0; at < f.size(); at += 7) {
    std::string bad = f;
    bad[at] = static_cast<char>(bad[at] ^ 0x01);
    EXPECT_THROW(cache::decode_tuning(bad, "t"), npucache::CacheError) << "offset " << at;
  }
  EXPECT_THROW(cache::decode_tuning(f.substr(0, f.size() - 1), "t"), npucache::CacheError);
  EXPECT_THROW(cache::decode_tuning("", "t"), npucache::CacheError);
}
