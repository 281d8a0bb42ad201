// Writes a whole file atomically: the text goes to a temporary file beside the target, which is
// then renamed over it, so a failed or interrupted run never leaves a half-written output.
#pragma once

#include <string>

namespace k3 {

void write_file_atomically(const std::string& path, const std::string& contents);
std::string read_file(const std::string& path);  // InputError naming the path when unreadable

}  // namespace k3
