// One registry for every extension point (cache policies, eviction policies, serving schedulers,
// claim evaluators): implementations register themselves by name at static-initialisation time,
// and each parses its own parameters from a Params (the shape of Ramulator 2's
// param<T>("key").default_val(v) / .required()). Adding an implementation is one .cpp file ending
// in K3PERF_REGISTER(Interface, Class, "name"), plus one line in a CMake source list.
//
// A library holding registering objects must reach every program whole (an OBJECT library, or a
// static one linked with WHOLE_ARCHIVE): nothing references those objects by symbol.
#pragma once

#include "core/error.h"
#include "core/limits.h"
#include "core/yaml_reader.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace k3 {

// The named parameters of one implementation: a YAML mapping from a file (absent: every parameter
// at its default), or values set in code. Errors name the file, the key and the implementation.
// Copies are deep (a copy edited in code never changes the original).
class Params {
 public:
  Params() : node_(YAML::NodeType::Map) {}
  // `node` is the implementation's mapping (e.g. `cache.checkpoint`), whose keys other than
  // `not_parameters` are its parameters; a scalar node (the name alone) has none.
  explicit Params(const YamlNode& node, std::vector<std::string> not_parameters = {})
      : node_(node.is_map() ? node.raw() : YAML::Node(YAML::NodeType::Map)),
        file_(node.file()),
        key_path_(node.key_path()),
        line_(node.line()),
        not_parameters_(std::move(not_parameters)),
        exclusive_(!node.is_map()) {}
  // The document is shared until one side sets a value (then that side copies it).
  Params(const Params& o)
      : node_(o.node_),
        file_(o.file_),
        key_path_(o.key_path_),
        line_(o.line_),
        not_parameters_(o.not_parameters_),
        implementation_(o.implementation_),
        exclusive_(false) {
    o.exclusive_ = false;
  }
  Params& operator=(const Params& o) {
    if (this != &o) {
      node_.reset(o.node_);
      file_ = o.file_;
      key_path_ = o.key_path_;
      line_ = o.line_;
      not_parameters_ = o.not_parameters_;
      implementation_ = o.implementation_;
      exclusive_ = o.exclusive_ = false;
      read_.clear();
    }
    return *this;
  }

  // Sets a parameter in code (a command-line flag, a claim's alternative).
  template <class T>
  Params& set(const std::string& key, const T& value) {
    if (!exclusive_) {
      node_.reset(YAML::Clone(node_));
      exclusive_ = true;
    }
    node_[key] = value;
    return *this;
  }
  bool has(const std::string& key) const {
    const YAML::Node& n = node_;  // const: a lookup must not add the key
    return n[key] && !n[key].IsNull();
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const std::string& k : YamlNode(node_, file_, key_path_).keys()) {
      if (std::find(not_parameters_.begin(), not_parameters_.end(), k) == not_parameters_.end()) out.push_back(k);
    }
    return out;
  }
  // Prefixes errors with "<what> '<name>'" (e.g. "checkpoint policy 'sparse'"); set by the registry.
  void name_implementation(std::string what) { implementation_ = std::move(what); }

  // One parameter being read: `.default_val(v)` or `.required()` returns its value.
  template <class T>
  class Reader {
   public:
    Reader(const Params& p, std::string key) : p_(p), key_(std::move(key)) {}
    T default_val(const T& fallback) const { return p_.has(key_) ? read() : fallback; }
    T required() const {
      if (!p_.has(key_)) p_.fail_here(fmt::format("missing required parameter '{}'", key_));
      return read();
    }

   private:
    T read() const {
      const YamlNode n = p_.child(key_);
      try {
        if constexpr (std::is_same_v<T, std::string>)
          return n.as_string();
        else if constexpr (std::is_same_v<T, bool>)
          return n.as_bool();
        else if constexpr (std::is_integral_v<T>)
          return read_int<T>(n, IntLimit{"an integer parameter", std::numeric_limits<T>::min(),
                                         static_cast<long long>(std::min<unsigned long long>(
                                             std::numeric_limits<T>::max(), std::numeric_limits<long long>::max())),
                                         ""});
        else
          return static_cast<T>(n.as_double());
      } catch (const InputError& e) {
        throw InputError(p_.implementation_.empty()
                             ? std::string(e.what())
                             : fmt::format("{} (a parameter of {})", e.what(), p_.implementation_));
      }
    }
    const Params& p_;
    std::string key_;
  };
  template <class T>
  Reader<T> param(const std::string& key) const {
    read_.push_back(key);
    return Reader<T>(*this, key);
  }

  // A parameter's value broke a rule of the implementation: names the file, key and implementation.
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    if (!has(key)) fail_here(fmt::format("parameter '{}': {}", key, what));
    child(key).fail(implementation_.empty() ? what : fmt::format("{}: {}", implementation_, what));
  }
  // Keys the implementation never asked for: an error (a typo is not a silent default).
  void expect_all_read() const {
    for (const std::string& k : keys()) {
      if (std::find(read_.begin(), read_.end(), k) == read_.end()) {
        std::string known;
        for (const std::string& r : read_) known += (known.empty() ? "" : ", ") + r;
        fail(k, fmt::format("unknown parameter; expected one of {{{}}}", known));
      }
    }
  }

 private:
  YamlNode child(const std::string& key) const {
    const YAML::Node& n = node_;
    return YamlNode(n[key], file_, key_path_.empty() ? key : key_path_ + "." + key);
  }
  [[noreturn]] void fail_here(const std::string& what) const {
    const std::string where = file_.empty() ? std::string()
                              : line_ > 0   ? fmt::format("{}:{}: ", file_, line_)
                                            : file_ + ": ";
    const std::string key = key_path_.empty() ? std::string() : fmt::format("key '{}': ", key_path_);
    const std::string who = implementation_.empty() ? std::string() : implementation_ + ": ";
    throw InputError(where + key + who + what);
  }
  YAML::Node node_;
  std::string file_;
  std::string key_path_;
  int line_ = 0;
  std::vector<std::string> not_parameters_;
  std::string implementation_;
  mutable bool exclusive_ = true;
  mutable std::vector<std::string> read_;
};

// `key: name` or `key: {name: ..., <parameter>: value, ...}`: the implementation's name and its
// parameters.
inline std::pair<std::string, Params> name_and_params(const YamlNode& node) {
  if (!node.is_map()) return {node.as_string(), Params(node)};
  return {node["name"].as_string(), Params(node, {"name"})};
}

// Implementations of `Interface` by name. An implementation with parameters is constructed from
// its Params (`explicit Class(const Params&)`) and reads them in its constructor; one without is
// default-constructed. Keys it did not read are then an error. `Interface::kind` names the extension point in messages
// ("checkpoint policy").
template <class Interface>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Interface>(const Params&)>;

  static Registry& instance() {
    static Registry r;
    return r;
  }

  // Throws k3::Error naming both implementations when the name is taken (at static
  // initialisation, through K3PERF_REGISTER, that ends the program with the message).
  bool add(const std::string& name, const std::string& class_name, Factory factory) {
    auto [it, inserted] = entries_.try_emplace(name, Entry{class_name, std::move(factory)});
    if (!inserted) {
      throw Error(fmt::format("two {}s registered as '{}': {} and {}", Interface::kind, name, it->second.class_name,
                              class_name));
    }
    return true;
  }

  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, e] : entries_) out.push_back(name);
    return out;
  }

  // An unknown name is an InputError listing the registered ones; `where` is the message's prefix
  // (file:line: key ...), or empty.
  std::unique_ptr<Interface> make(const std::string& name, Params params = {}, const std::string& where = "") const {
    auto it = entries_.find(name);
    if (it == entries_.end()) throw InputError(unknown(name, where));
    params.name_implementation(fmt::format("{} '{}'", Interface::kind, name));
    std::unique_ptr<Interface> out = it->second.factory(params);
    params.expect_all_read();
    return out;
  }
  // From a config file: `key: name`, or `key: {name: ..., <parameter>: value, ...}`; errors point
  // at the node.
  std::unique_ptr<Interface> make(const YamlNode& node) const {
    auto [name, params] = name_and_params(node);
    if (!contains(name)) node.fail(unknown(name));
    return make(name, params);
  }
  // The same message make() throws, for callers that check a name before they build.
  std::string unknown(const std::string& name, const std::string& where = "") const {
    std::string known;
    for (const auto& [n, e] : entries_) known += (known.empty() ? "" : ", ") + n;
    return fmt::format("{}unknown {} '{}' (known: {})", where.empty() ? "" : where + ": ", Interface::kind, name,
                       known);
  }

 private:
  struct Entry {
    std::string class_name;
    Factory factory;
  };
  std::map<std::string, Entry> entries_;  // ordered: names() and messages are deterministic
};

}  // namespace k3

namespace k3::detail {
template <class Interface, class Class>
std::unique_ptr<Interface> construct(const Params& p) {
  if constexpr (std::is_constructible_v<Class, const Params&>)
    return std::make_unique<Class>(p);
  else
    return std::make_unique<Class>();
}
}  // namespace k3::detail

// At namespace scope, in the implementation's .cpp file.
#define K3PERF_REGISTER(Interface, Class, name)                  \
  [[maybe_unused]] static const bool k3perf_registered_##Class = \
      ::k3::Registry<Interface>::instance().add(name, #Class, &::k3::detail::construct<Interface, Class>)
