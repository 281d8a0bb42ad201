#include "engine/weights/weights_source.h"

#include "core/error.h"

#include <fmt/format.h>

#include <charconv>

namespace k3::weights {

WeightsSource parse_weights_source(const std::string& text) {
  WeightsSource w;
  if (text != "random" && text.rfind("random:", 0) != 0) {
    w.dir = text;
    return w;
  }
  w.random = true;
  if (text.size() == 6) return w;
  const std::string seed = text.substr(7);
  if (seed.empty() || seed.find_first_not_of("0123456789") != std::string::npos) {
    throw InputError(fmt::format("--weights {}: the seed after 'random:' must be a non-negative integer", text));
  }
  const auto [end, error] = std::from_chars(seed.data(), seed.data() + seed.size(), w.seed);
  if (error != std::errc() || end != seed.data() + seed.size()) {
    throw InputError(
        fmt::format("--weights {}: the seed after 'random:' exceeds 18446744073709551615 (2^64 - 1)", text));
  }
  return w;
}

}  // namespace k3::weights
