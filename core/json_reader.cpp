#include "core/json_reader.h"

#include "core/error.h"

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace k3 {

namespace {

// nlohmann's own DOM builder, with a depth count and the keys of each open object. sax_parse calls these
// members on this type, so they stand in for the base's. The parser itself keeps its containers on a heap stack.
class CheckedDomBuilder : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
  using Base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;

 public:
  CheckedDomBuilder(nlohmann::json& root, const std::string& origin, int max_depth)
      : Base(root, true), origin_(origin), max_depth_(max_depth) {}

  bool start_object(std::size_t n) {
    enter(true);
    return Base::start_object(n);
  }
  bool start_array(std::size_t n) {
    enter(false);
    return Base::start_array(n);
  }
  bool end_object() {
    open_.pop_back();
    return Base::end_object();
  }
  bool end_array() {
    open_.pop_back();
    return Base::end_array();
  }
  bool key(std::string& key) {
    if (!open_.back().keys.insert(key).second) {
      std::string parent;
      for (std::size_t i = 0; i + 1 < open_.size(); ++i) {
        if (!open_[i].object) continue;
        parent += (parent.empty() ? "" : ".") + open_[i].key;
      }
      throw InputError(fmt::format("{}: key '{}' appears twice{}", origin_, quoted_excerpt(key),
                                   parent.empty() ? "" : fmt::format(" in '{}'", quoted_excerpt(parent))));
    }
    open_.back().key = key;
    return Base::key(key);
  }
  template <class Exception>
  bool parse_error(std::size_t byte, const std::string& token, const Exception& e) {
    if (e.id == 406) {  // out_of_range: a number beyond a double
      throw InputError(fmt::format("{}: number {} at byte {} is beyond the range of a double", origin_,
                                   quoted_excerpt(token), byte));
    }
    throw InputError(fmt::format("{}: malformed JSON at byte {}: {}", origin_, byte, quoted_excerpt(e.what())));
  }

 private:
  struct Open {
    bool object;
    std::set<std::string> keys;
    std::string key;  // the latest key (objects)
  };
  void enter(bool object) {
    if (static_cast<int>(open_.size()) >= max_depth_) {
      throw InputError(fmt::format("{}: JSON nested deeper than {} levels", origin_, max_depth_));
    }
    open_.push_back({object, {}, {}});
  }
  const std::string& origin_;
  const int max_depth_;
  std::vector<Open> open_;
};

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& origin, int max_depth) {
  nlohmann::json root;
  CheckedDomBuilder builder(root, origin, max_depth);
  nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  return root;
}

JsonNode JsonNode::parse(const std::string& text, const std::string& origin) {
  auto doc = std::make_shared<nlohmann::json>(parse_json(text, origin));
  if (!doc->is_object()) throw InputError(fmt::format("{}: expected a JSON object at the top level", origin));
  JsonNode node(doc.get(), origin, "");
  node.owner_ = doc;
  return node;
}

JsonNode::JsonNode(const nlohmann::json* value, std::string file, std::string key_path)
    : value_(value), file_(std::move(file)), key_path_(std::move(key_path)) {}

void JsonNode::fail(const std::string& what) const {
  if (key_path_.empty()) throw InputError(fmt::format("{}: {}", file_, what));
  throw InputError(fmt::format("{}: key '{}': {}", file_, key_path_, what));
}

bool JsonNode::has(const std::string& key) const {
  return value_->is_object() && value_->contains(key) && !(*value_)[key].is_null();
}

std::optional<JsonNode> JsonNode::find(const std::string& key) const {
  if (!value_->is_object()) fail("expected an object");
  if (!has(key)) return std::nullopt;
  JsonNode child(&(*value_)[key], file_, key_path_.empty() ? key : key_path_ + "." + key);
  child.owner_ = owner_;
  return child;
}

JsonNode JsonNode::operator[](const std::string& key) const {
  std::optional<JsonNode> child = find(key);
  if (!child) {
    throw InputError(
        fmt::format("{}: missing required key '{}'", file_, key_path_.empty() ? key : key_path_ + "." + key));
  }
  return *child;
}

long long JsonNode::as_int() const {
  if (value_->is_number_integer()) return value_->get<long long>();
  if (value_->is_number_float()) {
    const double d = value_->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<long long>(d);
  }
  fail(fmt::format("expected an integer, got {}", quoted_excerpt(value_->dump())));
}

long long JsonNode::as_positive_int() const {
  const long long v = as_int();
  if (v <= 0) fail(fmt::format("expected a positive integer, got {}", v));
  return v;
}

long long JsonNode::as_non_negative_int() const {
  const long long v = as_int();
  if (v < 0) fail(fmt::format("expected an integer >= 0, got {}", v));
  return v;
}

double JsonNode::as_double() const {
  if (!value_->is_number()) fail(fmt::format("expected a number, got {}", quoted_excerpt(value_->dump())));
  return value_->get<double>();
}

bool JsonNode::as_bool() const {
  if (!value_->is_boolean()) fail(fmt::format("expected true or false, got {}", quoted_excerpt(value_->dump())));
  return value_->get<bool>();
}

std::string JsonNode::as_string() const {
  if (!value_->is_string()) fail(fmt::format("expected a string, got {}", quoted_excerpt(value_->dump())));
  return value_->get<std::string>();
}

std::vector<long long> JsonNode::as_int_list() const {
  if (!value_->is_array()) fail(fmt::format("expected a list of integers, got {}", quoted_excerpt(value_->dump())));
  std::vector<long long> out;
  for (std::size_t i = 0; i < value_->size(); ++i) {
    JsonNode item(&(*value_)[i], file_, fmt::format("{}[{}]", key_path_, i));
    out.push_back(item.as_int());
  }
  return out;
}

}  // namespace k3
