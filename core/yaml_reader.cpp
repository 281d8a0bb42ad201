#include "core/yaml_reader.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/yaml_set.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

namespace k3 {

namespace {

// What YAML::Load lets through, found from the parser's events (aliases are not expanded, so this is linear):
// nesting deeper than limit::nesting, a key that is not a single value (a mapping used as a key made yaml-cpp throw
// "bad conversion" later), and a key twice in one mapping (yaml-cpp keeps one of them silently).
class DocumentChecker : public YAML::EventHandler {
 public:
  explicit DocumentChecker(const std::string& origin) : origin_(origin) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { value(mark, "~"); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { value(mark, std::nullopt); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string& text) override {
    value(mark, text);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, false);
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, true);
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Open {
    bool map;
    bool expect_key = true;
    std::set<std::string> keys;
  };
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", origin_, mark.line + 1, what));
  }
  // A value in the innermost container: in a mapping, keys and values alternate.
  void value(const YAML::Mark& mark, const std::optional<std::string>& scalar) {
    if (open_.empty() || !open_.back().map) return;
    Open& o = open_.back();
    if (o.expect_key) {
      if (!scalar) fail(mark, "a key must be a single value, not a list, a mapping or an alias");
      if (!o.keys.insert(*scalar).second) {
        fail(mark, fmt::format("key '{}' appears twice in one mapping", quoted_excerpt(*scalar)));
      }
    }
    o.expect_key = !o.expect_key;
  }
  void open(const YAML::Mark& mark, bool map) {
    value(mark, std::nullopt);
    if (open_.size() >= static_cast<std::size_t>(limit::nesting.value)) {
      fail(mark, fmt::format("YAML nested deeper than {} levels", limit::nesting.value));
    }
    open_.push_back({map, true, {}});
  }
  const std::string& origin_;
  std::vector<Open> open_;
};

YamlNode parse(const std::string& text, const std::string& origin) {
  try {
    std::istringstream stream(text);
    YAML::Parser events(stream);
    DocumentChecker checker(origin);
    events.HandleNextDocument(checker);
    YAML::Node root = YAML::Load(text);
    if (!root.IsMap()) {
      throw InputError(fmt::format("{}: expected a YAML mapping at the top level", origin));
    }
    return YamlNode(root, origin, "");
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}: YAML syntax error: {}", origin, e.mark.line + 1, e.msg));
  }
}

}  // namespace

YamlNode YamlNode::load_file(const std::string& path) { return parse(read_file(path), path); }

YamlNode YamlNode::load_string(const std::string& text, const std::string& origin) { return parse(text, origin); }

YamlNode::YamlNode(YAML::Node node, std::string file, std::string key_path)
    : node_(std::move(node)), file_(std::move(file)), key_path_(std::move(key_path)) {}

YamlNode& YamlNode::operator=(const YamlNode& other) {
  if (this != &other) {
    node_.reset(other.node_);
    overridden_ = other.overridden_;
    file_ = other.file_;
    key_path_ = other.key_path_;
  }
  return *this;
}

int YamlNode::line() const {
  const YAML::Mark mark = node_.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

void YamlNode::mark_overridden(const std::vector<std::string>& assignments) {
  overridden_ = std::make_shared<const std::vector<std::string>>(assignments);
}

std::string YamlNode::location() const {
  if (overridden_ && !key_path_.empty()) {
    for (const std::string& a : *overridden_) {
      const std::string key = set_key(a);
      if (key_path_ == key || key_path_.rfind(key + ".", 0) == 0 || key_path_.rfind(key + "[", 0) == 0) {
        return fmt::format("{} (--set {})", file_, a);
      }
    }
  }
  return line() > 0 ? fmt::format("{}:{}", file_, line()) : file_;
}

void YamlNode::fail(const std::string& what) const {
  if (key_path_.empty()) throw InputError(fmt::format("{}: {}", location(), what));
  throw InputError(fmt::format("{}: key '{}': {}", location(), key_path_, what));
}

bool YamlNode::has(const std::string& key) const { return node_.IsMap() && node_[key]; }

std::optional<YamlNode> YamlNode::find(const std::string& key) const {
  if (!node_.IsMap()) fail("expected a mapping");
  YAML::Node child = node_[key];
  if (!child || child.IsNull()) return std::nullopt;
  YamlNode out(child, file_, key_path_.empty() ? key : key_path_ + "." + key);
  out.overridden_ = overridden_;
  return out;
}

YamlNode YamlNode::operator[](const std::string& key) const {
  std::optional<YamlNode> child = find(key);
  if (!child) {
    const std::string full = key_path_.empty() ? key : key_path_ + "." + key;
    const std::string where = line() > 0 ? fmt::format("{}:{}", file_, line()) : file_;
    throw InputError(fmt::format("{}: missing required key '{}'", where, full));
  }
  return *child;
}

std::vector<YamlNode> YamlNode::items() const {
  if (!node_.IsSequence()) fail("expected a list");
  std::vector<YamlNode> out;
  for (std::size_t i = 0; i < node_.size(); ++i) {
    out.emplace_back(node_[i], file_, fmt::format("{}[{}]", key_path_, i));
    out.back().overridden_ = overridden_;
  }
  return out;
}

std::vector<std::string> YamlNode::keys() const {
  if (!node_.IsMap()) fail("expected a mapping");
  std::vector<std::string> out;
  for (const auto& kv : node_) out.push_back(kv.first.as<std::string>());
  return out;
}

std::vector<std::pair<std::string, YamlNode>> YamlNode::entries() const {
  if (!node_.IsMap()) fail("expected a mapping");
  std::vector<std::pair<std::string, YamlNode>> out;
  for (const auto& kv : node_) {
    std::string key = kv.first.as<std::string>();
    YamlNode value(kv.second, file_, key_path_.empty() ? key : key_path_ + "." + key);
    value.overridden_ = overridden_;
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

void YamlNode::expect_keys(const std::vector<std::string>& allowed) const {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  if (!node_.IsMap()) fail(fmt::format("expected a mapping with keys {{{}}}", list));
  for (const auto& key : keys()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      (*this)[key].fail(fmt::format("unknown key; expected one of {{{}}}", list));
    }
  }
}

std::string YamlNode::scalar_text() const {
  if (!node_.IsScalar()) fail("expected a single value, got a list or mapping");
  return node_.Scalar();
}

double YamlNode::as_double() const {
  const std::string text = scalar_text();
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value)) {
    fail(fmt::format("expected a number, got '{}'", text));
  }
  return value;
}

double YamlNode::as_positive() const {
  const double value = as_double();
  if (!(value > 0)) fail(fmt::format("expected a positive number, got '{}'", scalar_text()));
  return value;
}

double YamlNode::as_non_negative() const {
  const double value = as_double();
  if (value < 0) fail(fmt::format("expected a number >= 0, got '{}'", scalar_text()));
  return value;
}

double YamlNode::as_fraction() const {
  const double value = as_double();
  if (!(value > 0 && value <= 1)) fail(fmt::format("expected a fraction in (0, 1], got '{}'", scalar_text()));
  return value;
}

long long YamlNode::as_int() const {
  const std::string text = scalar_text();
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    // Accept integral values written in floating form (e.g. 1.048576e6).
    const double d = as_double();
    if (d != std::floor(d) || std::fabs(d) > 9.0e18) fail(fmt::format("expected an integer, got '{}'", text));
    return static_cast<long long>(d);
  }
  return value;
}

long long YamlNode::as_positive_int() const {
  const long long value = as_int();
  if (value <= 0) fail(fmt::format("expected a positive integer, got '{}'", scalar_text()));
  return value;
}

bool YamlNode::as_bool() const {
  const std::string text = scalar_text();
  if (text == "true" || text == "True" || text == "yes") return true;
  if (text == "false" || text == "False" || text == "no") return false;
  fail(fmt::format("expected true or false, got '{}'", text));
}

std::string YamlNode::as_string() const { return scalar_text(); }

std::string YamlNode::as_choice(const std::vector<std::string>& allowed) const {
  const std::string text = scalar_text();
  for (const auto& a : allowed) {
    if (a == text) return text;
  }
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail(fmt::format("expected one of {{{}}}, got '{}'", list, text));
}

}  // namespace k3
