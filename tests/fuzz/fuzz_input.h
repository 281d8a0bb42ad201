// The body every text target shares: the input as text to `parse`; an InputError is the right answer to bad
// input, anything else escapes and ends the run as a finding.
#pragma once

#include "core/error.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace k3::fuzz {

template <typename Parse>
int parse_text(const uint8_t* data, std::size_t size, Parse parse) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    parse(text);
  } catch (const InputError&) {
  }
  return 0;
}

}  // namespace k3::fuzz
