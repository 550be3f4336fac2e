// The fixture of the serving tests (test_serving.cpp,
// test_serving_templates.cpp): a scratch cache directory, serve_worker
// run on it, and what its output says.
#pragma once

#include "format/names.h"
#include "support/process.h"
#include "support/temp_dir_test.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

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
  // The files of the cache's templates directory, sorted (none if it is absent).
  std::vector<std::filesystem::path> template_files() const {
    std::vector<std::filesystem::path> files;
    const auto templates = dir / npucache::format::names::kTemplatesDir;
    if (!std::filesystem::exists(templates)) return files;
    for (const auto& e : std::filesystem::directory_iterator(templates)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
  }
  static double maxdiff(const std::string& text) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex("maxdiff ([0-9.eE+-]+)"))) return 1e30;
    return std::stod(m[1]);
  }
};
