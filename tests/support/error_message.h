// The message of the error `f` throws ("" when it throws none): an
// npucache::Error by default, or only the class E (another exception
// propagates and fails the test).
#pragma once

#include <npucache/error.h>

#include <functional>
#include <string>

namespace npucache::testing {

template <class E = Error>
std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// The same, for an npucache::Error (the shorthand the compiler tests use).
inline std::string message(const std::function<void()>& f) { return error_message(f); }

}  // namespace npucache::testing
