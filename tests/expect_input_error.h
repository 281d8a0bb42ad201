// Requires that `fn` throws k3::InputError whose message contains every fragment.
#pragma once

#include "core/error.h"

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

namespace k3::test {

inline void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected k3::InputError, nothing was thrown";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments) {
      EXPECT_NE(msg.find(f), std::string::npos) << "message lacks '" << f << "': " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected k3::InputError, got another exception: " << e.what();
  }
}

}  // namespace k3::test
