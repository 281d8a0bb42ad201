// Checked reads of the JSON files the GUI opens (`predict --json`, `compare --json`): a missing key or a value of
// the wrong type is an InputError naming the file, the key path and what the file should have been.
#pragma once

#include "core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace k3::gui {

struct JsonFields {
  using Json = nlohmann::ordered_json;
  const std::string& origin;
  const char* writer;  // "k3perf predict --json": what the file should come from

  const Json& at(const Json& object, const std::string& key, const std::string& path = "") const {
    if (!object.is_object() || !object.contains(key)) {
      throw InputError(fmt::format("{}: key '{}{}' is missing: not a `{}` file", origin, path, key, writer));
    }
    return object[key];
  }
  template <typename T>
  T get(const Json& object, const std::string& key, const std::string& path = "") const {
    const Json& v = at(object, key, path);
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw InputError(fmt::format("{}: key '{}{}': unexpected value {}", origin, path, key, v.dump().substr(0, 80)));
    }
  }
  template <typename T>
  T get_or(const Json& object, const std::string& key, T fallback) const {
    return object.is_object() && object.contains(key) ? get<T>(object, key) : fallback;
  }
  // A number or null (compare writes null for "none").
  std::optional<double> optional_number(const Json& object, const std::string& key, const std::string& path) const {
    const Json& v = at(object, key, path);
    if (v.is_null()) return std::nullopt;
    return get<double>(object, key, path);
  }
  const Json& array(const Json& object, const std::string& key) const {
    const Json& v = at(object, key);
    if (!v.is_array()) throw InputError(fmt::format("{}: key '{}': expected an array", origin, key));
    return v;
  }
};

}  // namespace k3::gui
