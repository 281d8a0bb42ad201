// Typed, checked access to a YAML document. Every error names file:line and the full key path
// ("hardware/h200.yaml:12: key 'gpu.hbm_capacity_bytes': expected a positive number, got '-1'").
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace k3 {

class YamlNode {
 public:
  // Parses a file; a syntax error becomes an InputError naming the file and line.
  static YamlNode load_file(const std::string& path);
  // Parses text; `origin` names it in errors (e.g. "<embedded default scenario>").
  static YamlNode load_string(const std::string& text, const std::string& origin);

  YamlNode(YAML::Node node, std::string file, std::string key_path);
  YamlNode(const YamlNode&) = default;
  // yaml-cpp's Node::operator= writes through to the node it refers to; assigning a YamlNode must
  // rebind instead, or copying claims and scenarios around would overwrite their documents.
  YamlNode& operator=(const YamlNode& other);

  bool has(const std::string& key) const;
  YamlNode operator[](const std::string& key) const;  // required child mapping entry
  std::optional<YamlNode> find(const std::string& key) const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  std::vector<YamlNode> items() const;    // elements of a sequence
  std::vector<std::string> keys() const;  // keys of a mapping, in file order
  // Each key of a mapping with its value, in file order: one pass, where node[key] per key is quadratic (yaml-cpp
  // finds a key by walking the mapping).
  std::vector<std::pair<std::string, YamlNode>> entries() const;
  // Rejects keys outside `allowed`, so a typo ("hbm_bandwith") is an error, not a silent default.
  void expect_keys(const std::vector<std::string>& allowed) const;

  double as_double() const;
  double as_positive() const;      // > 0
  double as_non_negative() const;  // >= 0
  double as_fraction() const;      // in (0, 1]
  long long as_int() const;
  long long as_positive_int() const;
  bool as_bool() const;
  std::string as_string() const;
  // One of `allowed`; the error lists them.
  std::string as_choice(const std::vector<std::string>& allowed) const;

  const YAML::Node& raw() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& key_path() const { return key_path_; }
  int line() const;  // 1-based, 0 when unknown
  // "file:line: key 'a.b': <what>" — the prefix every error from here uses. Keys set from the
  // command line read "file (--set a.b=...): key 'a.b': <what>" instead.
  [[noreturn]] void fail(const std::string& what) const;
  // Records key paths whose values came from `--set key=value` (they have no line in the file).
  void mark_overridden(const std::vector<std::string>& assignments);

 private:
  std::string scalar_text() const;
  std::string location() const;
  YAML::Node node_;
  std::shared_ptr<const std::vector<std::string>> overridden_;  // "a.b=value" assignments
  std::string file_;
  std::string key_path_;
};

}  // namespace k3
