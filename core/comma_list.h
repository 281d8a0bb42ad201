// "a, b, c": the one way k3perf's messages list names (known keys, files, choices).
#pragma once

#include <string>
#include <vector>

namespace k3 {

std::string comma_list(const std::vector<std::string>& items);

}  // namespace k3
