// One error vocabulary for k3perf. Library code throws k3::Error (never exits);
// the CLI catches it at the top and prints the message.
//   K3_CHECK(cond, fmt, args...)  programmer/internal invariant: names the condition and file:line.
//   k3::InputError                user input (config, scenario, hardware file): names file, key, expectation.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace k3 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An error in something the user gave us. The message already names the file and key.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace k3

#define K3_CHECK(cond, ...)                                                                         \
  do {                                                                                              \
    if (!(cond)) ::k3::detail::check_failed(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
