// Checked access to a JSON document (Hugging Face config.json). Errors name the file and the
// full key path, e.g. "models/k3.json: key 'text_config.num_experts': expected a positive integer".
// Keys we do not read are ignored: published configs carry many.
#pragma once

#include "core/limits.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

// JSON text to a DOM, with the checks nlohmann's parser lacks: nesting deeper than `max_depth` (a deep document
// overflows the stack later, in dump() or a copy), a key twice in one object (nlohmann keeps the last silently)
// and numbers beyond the range of a double are InputErrors "<origin>: ...". Linear in the text.
nlohmann::json parse_json(std::string_view text, const std::string& origin,
                          int max_depth = static_cast<int>(limit::nesting.value));
// The same, keys kept in file order (what the GUI shows).
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& origin,
                                          int max_depth = static_cast<int>(limit::nesting.value));

// The members of a top-level JSON object, one at a time: `member(key, value)` gets each value as a document of its
// own, so that an object of a million members (a safetensors header) is never one DOM. The checks of parse_json;
// nesting counts the top level.
using JsonMemberCallback = std::function<void(const std::string& key, const nlohmann::json& value)>;
void parse_json_members(std::string_view text, const std::string& origin, int max_depth,
                        const JsonMemberCallback& member);

class JsonNode {
 public:
  static JsonNode parse(const std::string& text, const std::string& origin);
  JsonNode(const nlohmann::json* value, std::string file, std::string key_path);

  bool has(const std::string& key) const;                      // present and not null
  JsonNode operator[](const std::string& key) const;           // required
  std::optional<JsonNode> find(const std::string& key) const;  // absent or null -> nullopt

  long long as_int() const;
  long long as_positive_int() const;
  long long as_non_negative_int() const;
  double as_double() const;
  bool as_bool() const;
  std::string as_string() const;
  std::vector<long long> as_int_list() const;

  const nlohmann::json& raw() const { return *value_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::shared_ptr<const nlohmann::json> owner_;  // keeps the parsed document alive
  const nlohmann::json* value_;
  std::string file_;
  std::string key_path_;
};

}  // namespace k3
