// The headers most test programs include, compiled once per build into a
// precompiled header that every GoogleTest program of tests/ reuses
// (tests/CMakeLists.txt, npucache_test_pch): the standard library,
// GoogleTest and the public API, parsed once per build instead of once per
// unity batch of test sources. Only headers with no configuration of their
// own belong here (no MPI, spdlog or src/ header: their macros differ
// between programs). A test source still includes what it uses:
// NPUCACHE_TEST_PCH=OFF builds without this header, and scripts/long.sh
// does (a missing include then fails, unless another source of the same
// unity batch has it).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/module.h>
#include <npucache/ops.h>
#include <npucache/tensor.h>
