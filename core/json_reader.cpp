#include "core/json_reader.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
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

// The keys of one object, for the duplicate check: their bytes in one buffer and an open-addressing table of key
// numbers, about 20 bytes a key beside its text (a set of strings takes about 100, in three allocations a key).
class KeySet {
 public:
  // False when `key` is already in the set.
  bool insert(std::string_view key) {
    K3_CHECK(ends_.size() < kEmpty, "more than {} keys in one object", ends_.size());
    if (2 * (ends_.size() + 1) > slots_.size()) grow();
    const std::size_t slot = find_slot(key, std::hash<std::string_view>{}(key));
    if (slots_[slot] != kEmpty) return false;
    text_.append(key);
    ends_.push_back(text_.size());
    slots_[slot] = static_cast<uint32_t>(ends_.size() - 1);
    return true;
  }

  // Empty again; a small set keeps its buffers, so an object after an object allocates nothing.
  void clear() {
    text_.clear();
    ends_.clear();
    if (slots_.size() > kSmallSlots) {
      slots_ = {};
    } else {
      std::fill(slots_.begin(), slots_.end(), kEmpty);
    }
  }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  static constexpr std::size_t kSmallSlots = 16;
  std::string_view key(uint32_t i) const {
    const std::size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(text_).substr(begin, ends_[i] - begin);
  }
  // The slot holding `key`, or the empty one where it would go (linear probing; the table is at most half full).
  std::size_t find_slot(std::string_view k, std::size_t hash) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      if (slots_[slot] == kEmpty || key(slots_[slot]) == k) return slot;
    }
  }
  void grow() {
    std::vector<uint32_t> old =
        std::exchange(slots_, std::vector<uint32_t>(std::max<std::size_t>(kSmallSlots, 2 * slots_.size()), kEmpty));
    for (const uint32_t i : old) {
      if (i != kEmpty) slots_[find_slot(key(i), std::hash<std::string_view>{}(key(i)))] = i;
    }
  }
  std::string text_;
  std::vector<std::size_t> ends_;  // key i is text_[ends_[i - 1], ends_[i])
  std::vector<uint32_t> slots_;    // key numbers, kEmpty where free; a power of two in size
};

// nlohmann's own DOM builder, with a depth count and the keys of each open object. sax_parse calls these
// members on this type, so they stand in for the base's. The parser itself keeps its containers on a heap stack.
template <class Json>
class CheckedDomBuilder : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  // `outer_levels`, `outer_key`: the object open around the value this builds (MemberStreamer's top level) and
  // the key of the value in it. One builder builds one value after another into `root` (each replaces the last).
  CheckedDomBuilder(Json& root, const std::string& origin, int max_depth, int outer_levels = 0,
                    const std::string* outer_key = nullptr)
      : Base(root, true), origin_(origin), max_depth_(max_depth), outer_levels_(outer_levels), outer_key_(outer_key) {}

  bool start_object(std::size_t n) {
    enter(true);
    return Base::start_object(n);
  }
  bool start_array(std::size_t n) {
    enter(false);
    return Base::start_array(n);
  }
  bool end_object() {
    --depth_;
    return Base::end_object();
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }
  bool key(std::string& key) {
    Open& open = open_[depth_ - 1];
    if (!open.keys.insert(key)) {
      std::string parent = outer_key_ != nullptr ? *outer_key_ : std::string();
      for (std::size_t i = 0; i + 1 < depth_; ++i) {
        if (!open_[i].object) continue;
        parent += (parent.empty() ? "" : ".") + open_[i].key;
      }
      throw InputError(fmt::format("{}: key '{}' appears twice{}", origin_, quoted_excerpt(key),
                                   parent.empty() ? "" : fmt::format(" in '{}'", quoted_excerpt(parent))));
    }
    open.key = key;
    return Base::key(key);
  }
  template <class Exception>
  bool parse_error(std::size_t byte, const std::string& token, const Exception& e) {
    throw_parse_error(origin_, byte, token, e);
  }

 private:
  struct Open {
    bool object = false;
    KeySet keys;
    std::string key;  // the latest key (objects)
  };
  // open_[0, depth_) are the containers open now; the entries beyond are kept for their buffers.
  void enter(bool object) {
    if (static_cast<int>(depth_) + outer_levels_ >= max_depth_) {
      throw InputError(fmt::format("{}: JSON nested deeper than {} levels", origin_, max_depth_));
    }
    if (depth_ == open_.size()) open_.emplace_back();
    Open& open = open_[depth_++];
    open.object = object;
    open.keys.clear();
  }
  const std::string& origin_;
  const int max_depth_;
  const int outer_levels_;
  const std::string* const outer_key_;  // outlives this builder
  std::vector<Open> open_;
  std::size_t depth_ = 0;
};

// The members of a top-level object, built one after another by one CheckedDomBuilder and each handed on when
// complete.
class MemberStreamer {
  using Json = nlohmann::json;

 public:
  MemberStreamer(const std::string& origin, int max_depth, const JsonMemberCallback& member)
      : origin_(origin), member_(member), builder_(value_, origin, max_depth, 1, &key_) {}

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
    ++depth_;
    return builder_.start_object(n);
  }
  bool start_array(std::size_t n) {
    if (depth_ == 0) not_an_object();
    ++depth_;
    return builder_.start_array(n);
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
    if (depth_ > 1) return builder_.key(key);
    if (!keys_.insert(key)) throw InputError(fmt::format("{}: key '{}' appears twice", origin_, quoted_excerpt(key)));
    key_ = std::move(key);
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
  void end_member() { member_(key_, value_); }
  template <class Event>
  bool scalar(Event event) {
    if (depth_ == 0) not_an_object();
    if (depth_ > 1) return event(builder_);
    event(builder_);
    end_member();
    return true;
  }
  template <class Event>
  bool close(Event event) {
    --depth_;
    const bool ok = event(builder_);
    if (depth_ == 1) end_member();
    return ok;
  }

  const std::string& origin_;
  const JsonMemberCallback& member_;
  int depth_ = 0;  // 1 inside the top-level object
  KeySet keys_;
  std::string key_;
  Json value_;                       // the member being built
  CheckedDomBuilder<Json> builder_;  // after key_ and value_, which it refers to
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
