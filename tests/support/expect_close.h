// Two results of the same computation compared element by element (the
// tests of the compile surface: a compiled or cached result against eager):
// the sizes must be equal, then each element within `tol`. A failure names
// `what` and the index and fails the test; it ends the comparison, not the
// test (ASSERT_* returns from this function only).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace npucache::testing_support {

inline void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what,
                         float tol = 1e-4f) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << what << " at " << i;
}

}  // namespace npucache::testing_support
