// The message of the npucache::Error `f` throws ("" when it throws none).
#pragma once

#include <npucache/error.h>

#include <functional>
#include <string>

namespace npucache::testing {

inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace npucache::testing
