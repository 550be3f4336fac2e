// The fixture of the serving tests (test_serving.cpp,
// test_serving_templates.cpp): a scratch cache directory, serve_worker
// run on it, and what its output says.
#pragma once

#include "support/process.h"
#include "support/temp_dir_test.h"

#include <regex>
#include <string>

class Serving : public npucache::testing_support::TempDirTest {
 protected:
  Serving() : TempDirTest("serving") {}
  npucache::testing_support::Out serve(const std::string& args) {
    return npucache::testing_support::sh(std::string(SERVE_WORKER) + " " + dir.string() + " " + args);
  }
  static int number(const std::string& text, const std::string& key) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(key + " ([0-9]+)"))) return -1;
    return std::stoi(m[1]);
  }
  static double maxdiff(const std::string& text) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex("maxdiff ([0-9.eE+-]+)"))) return 1e30;
    return std::stod(m[1]);
  }
};
