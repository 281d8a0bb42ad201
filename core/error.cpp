#include "core/error.h"

namespace k3::detail {

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  throw Error(fmt::format("{} (check '{}' failed at {}:{})", message, condition, file, line));
}

}  // namespace k3::detail
