#include "core/json_reader.h"

#include "core/error.h"

#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace k3 {

namespace {

template <class Exception>
[[noreturn]] void throw_parse_error(const std::string& origin, std::size_t byte, const std::string& token,
                                    const Exception& e) {
  if (e.id == 406) {  // out_of_range: a number beyond a double
    throw InputError(
        fmt::format("{}: number {} at byte {} is beyond the range of a double", origin, quoted_excerpt(token), byte));
  }
  throw InputError(fmt::format("{}: malformed JSON at byte {}: {}", origin, byte, quoted_excerpt(e.what())));
}

// nlohmann's own DOM builder, with a depth count and the keys of each open object. sax_parse calls these
// members on this type, so they stand in for the base's. The parser itself keeps its containers on a heap stack.
template <class Json>
class CheckedDomBuilder : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  // `outer_levels`, `outer_key`: the object open around the value this builds (MemberStreamer's top level) and
  // the key of the value in it.
  CheckedDomBuilder(Json& root, const std::string& origin, int max_depth, int outer_levels = 0,
                    std::string outer_key = "")
      : Base(root, true),
        origin_(origin),
        max_depth_(max_depth),
        outer_levels_(outer_levels),
        outer_key_(std::move(outer_key)) {}

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
      std::string parent = outer_key_;
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
    throw_parse_error(origin_, byte, token, e);
  }

 private:
  struct Open {
    bool object;
    std::set<std::string> keys;
    std::string key;  // the latest key (objects)
  };
  void enter(bool object) {
    if (static_cast<int>(open_.size()) + outer_levels_ >= max_depth_) {
      throw InputError(fmt::format("{}: JSON nested deeper than {} levels", origin_, max_depth_));
    }
    open_.push_back({object, {}, {}});
  }
  const std::string& origin_;
  const int max_depth_;
  const int outer_levels_;
  const std::string outer_key_;
  std::vector<Open> open_;
};

// The members of a top-level object, each built by its own CheckedDomBuilder and handed on when complete.
class MemberStreamer {
  using Json = nlohmann::json;

 public:
  MemberStreamer(const std::string& origin, int max_depth, const JsonMemberCallback& member)
      : origin_(origin), max_depth_(max_depth), member_(member) {}

  bool null() {
    return scalar([](auto& b) { return b.null(); });
  }
  bool boolean(bool v) {
    return scalar([v](auto& b) { return b.boolean(v); });
  }
  bool number_integer(Json::number_integer_t v) {
    return scalar([v](auto& b) { return b.number_integer(v); });
  }
  bool number_unsigned(Json::number_unsigned_t v) {
    return scalar([v](auto& b) { return b.number_unsigned(v); });
  }
  bool number_float(Json::number_float_t v, const Json::string_t& text) {
    return scalar([v, &text](auto& b) { return b.number_float(v, text); });
  }
  bool string(Json::string_t& v) {
    return scalar([&v](auto& b) { return b.string(v); });
  }
  bool binary(Json::binary_t& v) {
    return scalar([&v](auto& b) { return b.binary(v); });
  }
  bool start_object(std::size_t n) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (depth_ == 1) begin_member();
    ++depth_;
    return builder_->start_object(n);
  }
  bool start_array(std::size_t n) {
    if (depth_ == 0) not_an_object();
    if (depth_ == 1) begin_member();
    ++depth_;
    return builder_->start_array(n);
  }
  bool end_object() {
    if (depth_ == 1) {
      depth_ = 0;
      return true;
    }
    return close([](auto& b) { return b.end_object(); });
  }
  bool end_array() {
    return close([](auto& b) { return b.end_array(); });
  }
  bool key(std::string& key) {
    if (depth_ > 1) return builder_->key(key);
    if (!keys_.insert(key).second) {
      throw InputError(fmt::format("{}: key '{}' appears twice", origin_, quoted_excerpt(key)));
    }
    key_ = key;
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t byte, const std::string& token, const Exception& e) {
    throw_parse_error(origin_, byte, token, e);
  }

 private:
  [[noreturn]] void not_an_object() const {
    throw InputError(fmt::format("{}: expected a JSON object at the top level", origin_));
  }
  void begin_member() {
    value_ = Json();
    builder_.emplace(value_, origin_, max_depth_, 1, key_);
  }
  void end_member() {
    builder_.reset();
    member_(key_, value_);
  }
  template <class Event>
  bool scalar(Event event) {
    if (depth_ == 0) not_an_object();
    if (depth_ > 1) return event(*builder_);
    begin_member();
    event(*builder_);
    end_member();
    return true;
  }
  template <class Event>
  bool close(Event event) {
    --depth_;
    const bool ok = event(*builder_);
    if (depth_ == 1) end_member();
    return ok;
  }

  const std::string& origin_;
  const int max_depth_;
  const JsonMemberCallback& member_;
  int depth_ = 0;  // 1 inside the top-level object
  std::unordered_set<std::string> keys_;
  std::string key_;
  Json value_;
  std::optional<CheckedDomBuilder<Json>> builder_;
};

template <class Json>
Json parse_checked(std::string_view text, const std::string& origin, int max_depth) {
  Json root;
  CheckedDomBuilder<Json> builder(root, origin, max_depth);
  Json::sax_parse(text.begin(), text.end(), &builder);
  return root;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& origin, int max_depth) {
  return parse_checked<nlohmann::json>(text, origin, max_depth);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& origin, int max_depth) {
  return parse_checked<nlohmann::ordered_json>(text, origin, max_depth);
}

void parse_json_members(std::string_view text, const std::string& origin, int max_depth,
                        const JsonMemberCallback& member) {
  MemberStreamer streamer(origin, max_depth, member);
  nlohmann::json::sax_parse(text.begin(), text.end(), &streamer);
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
