// A GoogleTest check of an error's message: `f` throws an E whose message
// holds `text`; the failure prints the message it got.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "support/error_message.h"

namespace npucache::testing {

template <class E>
void expect_error(const std::function<void()>& f, const std::string& text) {
  const std::string m = error_message<E>(f);
  EXPECT_NE(m.find(text), std::string::npos) << "message: '" << m << "', expected to contain '" << text << "'";
}

}  // namespace npucache::testing
