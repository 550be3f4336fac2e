#include <npucache/device.h>
#include <npucache/error.h>

#include "runtime/allocator.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace npucache;

TEST(Allocator, ReusesFreedBlocksAndKeepsStatistics) {
  auto a = std::make_shared<runtime::CachingAllocator>(0, "test", std::size_t{64} << 20);
  void* first;
  {
    runtime::BlockPtr b = a->allocate(1000);
    first = b->data();
    EXPECT_EQ(b->size(), 1024u);  // rounded to 512-byte granules
    EXPECT_EQ(a->stats().allocated, 1024u);
  }
  EXPECT_EQ(a->stats().allocated, 0u);
  EXPECT_EQ(a->stats().reserved, 1024u);
  runtime::BlockPtr again = a->allocate(900);
  EXPECT_EQ(again->data(), first);  // served from the cache
  EXPECT_EQ(a->stats().cache_hits, 1u);
  runtime::BlockPtr big = a->allocate(3 << 20);
  EXPECT_EQ(big->size(), std::size_t{4} << 20);  // 2 MiB granules above 1 MiB
  EXPECT_EQ(a->stats().peak_allocated, 1024u + (4u << 20));
}

TEST(Allocator, OutOfMemoryNamesDeviceRequestAndFreeMemory) {
  auto a = std::make_shared<runtime::CachingAllocator>(5, "simnpu-v1", std::size_t{8} << 20);
  runtime::BlockPtr keep = a->allocate(std::size_t{6} << 20);
  try {
    a->allocate(std::size_t{4} << 20);
    FAIL() << "allocation beyond capacity succeeded";
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("device 5"), std::string::npos) << m;
    EXPECT_NE(m.find("allocating 4.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("free 2.00 MiB"), std::string::npos) << m;
  }
  keep.reset();  // cached, not returned...
  EXPECT_EQ(a->stats().reserved, std::size_t{6} << 20);
  runtime::BlockPtr fits = a->allocate(std::size_t{8} << 20);  // ...until needed: the cache is released
  EXPECT_EQ(a->stats().reserved, std::size_t{8} << 20);
}

TEST(Allocator, BlocksOutliveTheirAllocator) {
  runtime::BlockPtr b;
  {
    auto a = std::make_shared<runtime::CachingAllocator>(0, "test", 1 << 20);
    b = a->allocate(100);
  }
  std::memset(b->data(), 1, 100);
  b.reset();  // frees to the host without the allocator
  SUCCEED();
}

TEST(Device, PropertiesAndOom) {
  Device d(3, DeviceProperties{"simnpu-v1", std::size_t{1} << 20, 4, "9.9.9"}, 0.0);
  EXPECT_EQ(d.properties().runtime_version, "9.9.9");
  EXPECT_THROW(d.allocate(std::size_t{2} << 20), OutOfMemoryError);
  EXPECT_EQ(Platform::get().device_count(), Platform::get().config().num_devices);
  EXPECT_EQ(Platform::get().device(0).properties().name, "simnpu-v1");
}
