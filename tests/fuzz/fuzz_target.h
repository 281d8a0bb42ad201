// The fuzz targets of tests/fuzz share one libFuzzer program, k3perf_fuzz, that runs the target its name selects:
// fuzz_<target> (a link to k3perf_fuzz) or K3PERF_FUZZ_TARGET=<target>. A target is one file <target>_fuzz.cpp:
//   K3PERF_FUZZ_TEXT_TARGET(mooncake_jsonl) { k3::workload::parse_mooncake_trace(text, "fuzz.jsonl"); }
// An InputError is the right answer to bad input; any other exception escapes and ends the run as a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace k3::fuzz {

using Entry = void (*)(std::span<const uint8_t> data);

// Registers a target at static initialisation; returns 0.
int register_target(const char* name, Entry entry);

// A folder of its own for this process (created once, removed at exit), for targets whose reader takes a path.
const std::string& scratch_dir();
// Writes `data` to <scratch_dir()>/<name> and returns the path.
std::string write_scratch(const std::string& name, std::span<const uint8_t> data);

}  // namespace k3::fuzz

#define K3PERF_FUZZ_TARGET(name)                                    \
  static void k3perf_fuzz_##name(std::span<const uint8_t> data);    \
  [[maybe_unused]] static const int k3perf_fuzz_registered_##name = \
      ::k3::fuzz::register_target(#name, k3perf_fuzz_##name);       \
  static void k3perf_fuzz_##name([[maybe_unused]] std::span<const uint8_t> data)

// A target that reads the input as text: the body sees `const std::string& text`.
#define K3PERF_FUZZ_TEXT_TARGET(name)                                                              \
  static void k3perf_fuzz_text_##name(const std::string& text);                                    \
  K3PERF_FUZZ_TARGET(name) {                                                                       \
    k3perf_fuzz_text_##name(std::string(reinterpret_cast<const char*>(data.data()), data.size())); \
  }                                                                                                \
  static void k3perf_fuzz_text_##name([[maybe_unused]] const std::string& text)
