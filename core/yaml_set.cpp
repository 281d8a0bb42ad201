#include "core/yaml_set.h"

#include "core/error.h"

namespace k3 {

std::string set_key(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

SetAssignment parse_set(const std::string& assignment, const std::string& context) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("{} '{}': expected key.path=value", context, assignment));
  }
  SetAssignment a{assignment.substr(0, eq), {}};
  try {
    a.value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{} '{}': cannot parse the value: {}", context, assignment, e.msg));
  }
  return a;
}

void apply_set(YAML::Node root, const std::string& assignment) {
  const auto [path, value] = parse_set(assignment);
  // Every key is checked before the document changes, so a bad path leaves it as it was.
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty()) throw InputError(fmt::format("--set '{}': empty key in '{}'", assignment, path));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  YAML::Node node = root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node[parts[i]] || !node[parts[i]].IsMap()) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    YAML::Node child = node[parts[i]];
    node.reset(child);  // rebind: Node::operator= would write through
  }
  node[parts.back()] = value;
}

void apply_sets(YAML::Node root, const std::vector<std::string>& assignments) {
  for (const std::string& a : assignments) apply_set(root, a);
}

}  // namespace k3
