// Differential test: for the shipped models and every combination of mode,
// dynamic, ge_cache and hit check, the cached method's results in a cold
// and in a warm process equal the eager results (within 1e-5), and the cold
// and warm results are bit for bit the same (the same program ran).
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Outcome {
  int status = 0;
  std::string text, outcome, bits;
  double maxdiff = 1e30;
  int compiled = -1;
};

Outcome run(const std::string& args) {
  Outcome r;
  FILE* p = ::popen((std::string(DIFF_WORKER) + " " + args + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p)) r.text += buf.data();
  r.status = WEXITSTATUS(::pclose(p));
  std::istringstream lines(r.text);
  std::string l, skip;
  while (std::getline(lines, l)) {
    std::istringstream in(l);
    if (l.rfind("status ", 0) == 0)
      in >> skip >> r.outcome >> skip >> r.compiled;
    else if (l.rfind("maxdiff ", 0) == 0)
      in >> skip >> r.maxdiff >> skip >> r.bits;
  }
  return r;
}

using Combo = std::tuple<std::string, std::string, int, int, std::string>;

class Differential : public ::testing::TestWithParam<Combo> {};

std::string combo_name(const ::testing::TestParamInfo<Combo>& info) {
  const auto& [model, mode, dynamic, ge, check] = info.param;
  std::string n = model + "_" + mode + (dynamic ? "_dynamic" : "_static") + (ge ? "_ge" : "") + "_" + check;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

}  // namespace

TEST_P(Differential, CachedColdAndWarmEqualEager) {
  const auto& [model, mode, dynamic, ge, check] = GetParam();
  const npucache::testing_support::TempDir tmp("diff", npucache::testing_support::current_test_name());
  const fs::path dir = tmp.path() / "cache";
  const std::string args =
      model + " " + dir.string() + " " + mode + " " + std::to_string(dynamic) + " " + std::to_string(ge) + " " + check;
  Outcome cold = run(args), warm = run(args);
  ASSERT_EQ(cold.status, 0) << cold.text;
  ASSERT_EQ(warm.status, 0) << warm.text;
  EXPECT_EQ(cold.outcome, "compiled") << cold.text;
  EXPECT_EQ(warm.outcome, "hit") << warm.text;
  EXPECT_EQ(warm.compiled, 0) << warm.text;
  EXPECT_LE(cold.maxdiff, 1e-5) << cold.text;
  EXPECT_LE(warm.maxdiff, 1e-5) << warm.text;
  EXPECT_EQ(cold.bits, warm.bits) << "cold and warm ran different programs\n" << cold.text << warm.text;
}

INSTANTIATE_TEST_SUITE_P(AllOptions, Differential,
                         ::testing::Combine(::testing::Values("seed", "mlp", "tiny-llama"),
                                            ::testing::Values("max-autotune", "reduce-overhead"),
                                            ::testing::Values(0, 1), ::testing::Values(0, 1),
                                            ::testing::Values("trace", "code_version")),
                         combo_name);
