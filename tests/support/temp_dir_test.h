// The GoogleTest side of support/temp_dir.h.
//
// Contract:
//   - current_test_name(): the running test's name ("Name/0" for a
//     parameterized one), "" when no test is running.
//   - TempDirTest, a fixture: SetUp makes `base`, a TempDir tagged with the
//     constructor's tag ("test" by default) and the test's name (created,
//     0700, empty), and sets `dir` = base / "cache", NOT created (caches
//     create their own directory). TearDown removes base and everything in
//     it (see TempDir). A fixture with more to do overrides SetUp/TearDown
//     and calls these.
//
//   class RecordCodec : public TempDirTest {
//    protected:
//     RecordCodec() : TempDirTest("records") {}
//   };
//
// A parameterized fixture adds ::testing::WithParamInterface<T>.
#pragma once

#include "support/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace npucache::testing_support {

inline std::string current_test_name() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return t ? t->name() : "";
}

class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string tag = "test") : tag_(std::move(tag)) {}
  void SetUp() override {
    temp_.emplace(tag_, current_test_name());
    base = temp_->path();
    dir = base / "cache";
  }
  void TearDown() override { temp_.reset(); }

  std::filesystem::path base;  // created, 0700, empty
  std::filesystem::path dir;   // base / "cache", not created

 private:
  std::string tag_;
  std::optional<TempDir> temp_;
};

}  // namespace npucache::testing_support
