// "A cache hit is always the right program", as a new user meets it: each
// case of tests/user/user_models.cpp (a model written against the public
// headers only) runs cold and warm in separate processes; cached results
// must equal eager ones, or the run must stop with a clear error.
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

using npucache::testing_support::has;
using npucache::testing_support::Out;
using npucache::testing_support::sh;

// The line of `label` in a worker's output.
std::string line(const std::string& text, const std::string& label) {
  const auto at = text.find(label + " status ");
  if (at == std::string::npos) return "(no line for " + label + ")";
  return text.substr(at, text.find('\n', at) - at);
}

class UserModels : public npucache::testing_support::TempDirTest {
 protected:
  UserModels() : TempDirTest("user") {}
  Out run(const std::string& which, const std::string& flags = "", const char* bin = USER_MODELS) {
    return sh(std::string(bin) + " " + which + " " + dir.string() + " " + flags);
  }
};

}  // namespace

// Case 1: two methods cached without a method name get their own entries,
// named from the code, side by side under one model_info.
TEST_F(UserModels, TwoUnnamedMethodsNeverShareAnEntry) {
  for (int round = 0; round < 2; ++round) {
    Out o = run("two-methods");
    ASSERT_EQ(o.status, 0) << o.text;
    const std::string p = line(o.text, "prompt"), d = line(o.text, "decode");
    EXPECT_TRUE(has(p, "match yes")) << o.text;
    EXPECT_TRUE(has(d, "match yes")) << o.text;
    EXPECT_TRUE(has(p, round == 0 ? "status compiled compiled 1" : "status hit compiled 0")) << o.text;
    EXPECT_TRUE(has(d, round == 0 ? "status compiled compiled 1" : "status hit compiled 0")) << o.text;
    EXPECT_TRUE(has(p, "/prompt values")) << p;
    EXPECT_TRUE(has(d, "/decode values")) << d;
    // One model_info for the model: the entries differ only in ${func}.
    const auto entry = [](const std::string& l) {
      return l.substr(l.find("entry ") + 6, l.find(" values") - l.find("entry ") - 6);
    };
    EXPECT_EQ(fs::path(entry(p)).parent_path(), fs::path(entry(d)).parent_path()) << p << "\n" << d;
  }
}

// Case 2: a plain member used in the computation changes between runs.
TEST_F(UserModels, ChangedHyperParameterIsNeverServedStale) {
  Out two = run("scaled", "--scale 2");
  Out three = run("scaled", "--scale 3");
  Out three_again = run("scaled", "--scale 3");
  for (const Out* o : {&two, &three, &three_again}) {
    ASSERT_EQ(o->status, 0) << o->text;
    EXPECT_TRUE(has(line(o->text, "forward"), "match yes")) << o->text;
  }
  EXPECT_TRUE(has(line(three.text, "forward"), "status compiled compiled 1")) << three.text;
  EXPECT_TRUE(has(three.text, "constant 2 stored, 3 now")) << three.text;
  EXPECT_TRUE(has(line(three_again.text, "forward"), "status hit compiled 0")) << three_again.text;
}

// Case 3: two classes with the same short name in different namespaces.
TEST_F(UserModels, SameShortClassNameInTwoNamespacesNeverShares) {
  for (int round = 0; round < 2; ++round) {
    Out o = run("namespaces");
    ASSERT_EQ(o.status, 0) << o.text;
    EXPECT_TRUE(has(line(o.text, "vision"), "match yes")) << o.text;
    EXPECT_TRUE(has(line(o.text, "audio"), "match yes")) << o.text;
    EXPECT_TRUE(has(line(o.text, "vision"), "vision.Net_dynamic_")) << o.text;
    EXPECT_TRUE(has(line(o.text, "audio"), "audio.Net_dynamic_")) << o.text;
    if (round == 1) {
      EXPECT_TRUE(has(line(o.text, "vision"), "status hit")) << o.text;
      EXPECT_TRUE(has(line(o.text, "audio"), "status hit")) << o.text;
    }
  }
}

// Case 5: a second program with the same model code shares the cache (no
// build-id in the key); a real code change is a miss, never served stale.
TEST_F(UserModels, SecondBinaryHitsAndChangedCodeMisses) {
  Out first = run("scaled", "--scale 2");
  ASSERT_EQ(first.status, 0) << first.text;
  Out twin = run("scaled", "--scale 2", USER_MODELS_TWIN);
  ASSERT_EQ(twin.status, 0) << twin.text;
  EXPECT_TRUE(has(line(twin.text, "forward"), "status hit compiled 0 match yes")) << twin.text;
  Out changed = run("scaled", "--scale 2", USER_MODELS_CHANGED);
  ASSERT_EQ(changed.status, 0) << changed.text;
  EXPECT_TRUE(has(line(changed.text, "forward"), "status compiled compiled 1 match yes")) << changed.text;
  EXPECT_TRUE(has(changed.text, "constant 0.5 stored, 0.75 now")) << changed.text;
  // The fast path trusts code_version: an unchanged version after a code
  // change serves the stored program, as documented; a new version misses.
  ASSERT_EQ(run("scaled", "--scale 2 --fast v1").status, 0);
  Out trusted = run("scaled", "--scale 2 --fast v1", USER_MODELS_CHANGED);
  EXPECT_TRUE(has(line(trusted.text, "forward"), "status hit compiled 0 match no")) << trusted.text;
  // A new version makes the changed code trace: its computation was stored
  // by the changed binary's earlier run, so it is read, not compiled.
  Out bumped = run("scaled", "--scale 2 --fast v2", USER_MODELS_CHANGED);
  EXPECT_TRUE(has(line(bumped.text, "forward"), "status hit compiled 0 match yes")) << bumped.text;
  EXPECT_TRUE(has(bumped.text, "code_version: stored 'v1', now 'v2'")) << bumped.text;
}

// Case 6: a method returning a struct works cold and warm, on both hit
// checks (the fast path rebuilds the struct from the stored output paths).
TEST_F(UserModels, StructReturningMethodWorksColdAndWarm) {
  for (const std::string flags : {"", "--fast v1", "--ge-cache"}) {
    fs::remove_all(dir);
    for (int round = 0; round < 2; ++round) {
      Out o = run("struct", flags);
      ASSERT_EQ(o.status, 0) << flags << "\n" << o.text;
      EXPECT_TRUE(has(line(o.text, "struct"), "match yes")) << flags << "\n" << o.text;
      EXPECT_TRUE(has(line(o.text, "struct-again"), "match yes")) << flags << "\n" << o.text;
      EXPECT_TRUE(has(o.text, "extras 2")) << o.text;
      EXPECT_TRUE(has(line(o.text, "struct"), round == 0 ? "status compiled" : "status hit")) << flags << "\n"
                                                                                              << o.text;
    }
  }
}

// Case 7: a single-process program tells whether it hit, with and without
// ge_cache.
TEST_F(UserModels, StatusTellsHitFromCompile) {
  for (const std::string flags : {"", "--ge-cache"}) {
    fs::remove_all(dir);
    EXPECT_TRUE(has(line(run("scaled", flags).text, "forward"), "status compiled compiled 1")) << flags;
    EXPECT_TRUE(has(line(run("scaled", flags).text, "forward"), "status hit compiled 0")) << flags;
  }
}

// Case 7: const member functions are compiled and cached like any other,
// named from the code, cold and warm, on both hit checks.
TEST_F(UserModels, ConstMethodsAreCachedColdAndWarm) {
  for (const std::string flags : {"", "--fast v1"}) {
    fs::remove_all(dir);
    for (int round = 0; round < 2; ++round) {
      Out o = run("const", flags);
      ASSERT_EQ(o.status, 0) << flags << "\n" << o.text;
      for (const char* label : {"score", "gate"}) {
        const std::string l = line(o.text, label);
        EXPECT_TRUE(has(l, "match yes")) << flags << "\n" << o.text;
        EXPECT_TRUE(has(l, round == 0 ? "status compiled compiled 1" : "status hit compiled 0"))
            << flags << " round " << round << "\n"
            << o.text;
        EXPECT_TRUE(has(l, std::string("/") + label + " values")) << l;
      }
      EXPECT_TRUE(has(line(o.text, "compiled-gate"), "match yes")) << o.text;
    }
  }
}
