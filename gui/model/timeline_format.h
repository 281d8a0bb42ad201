// How the timeline writes what it shows: durations with their unit, and kernel names without their
// template arguments and parameter lists. Qt-free.
#pragma once

#include <cstdint>
#include <string>

namespace k3::gui {

// "850 ns", "12.3 µs", "1.25 ms", "2.01 s": three significant digits in the largest unit that keeps the value ≥ 1.
std::string format_duration_ns(double ns);
// "void cublasLt::splitKreduce_kernel<32, 16, …>(cublasLt::…)" -> "cublasLt::splitKreduce_kernel".
std::string short_kernel_name(const std::string& name);

}  // namespace k3::gui
