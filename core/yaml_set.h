// `--set key.path=value`: one edit of a YAML document before it is read, the same for every verb
// (scenarios, serving and plan files). The value is parsed as YAML (a number, a list, a string);
// missing or non-mapping parents on the path become mappings. Errors name the assignment.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace k3 {

// Throws InputError for an assignment without '=' or with an empty key ("--set 'a..b=1': empty
// key in 'a..b'"), or a value that is not YAML.
void apply_set(YAML::Node root, const std::string& assignment);
void apply_sets(YAML::Node root, const std::vector<std::string>& assignments);

// The key path of an assignment ("workload.batch" of "workload.batch=64"); the whole text without '='.
std::string set_key(const std::string& assignment);

// An assignment split into its key path and its value parsed as YAML, as apply_set reads it; throws
// InputError("'<assignment>': expected key.path=value" or "...: cannot parse the value: ...") prefixed
// with `context` ("--set" for the command line).
struct SetAssignment {
  std::string key;
  YAML::Node value;
};
SetAssignment parse_set(const std::string& assignment, const std::string& context = "--set");

}  // namespace k3
