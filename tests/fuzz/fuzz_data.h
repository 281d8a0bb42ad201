// The data folder the scenario targets load named models and hardware from: $K3PERF_DATA_DIR (the bundle sets it
// to its copy of scenarios/), else the source tree's scenarios/.
#pragma once

#include "core/atomic_file.h"
#include "core/data_paths.h"

#include <filesystem>
#include <map>
#include <string>

namespace k3::fuzz {

inline const DataPaths& data() {
  static const DataPaths paths = DataPaths::resolve("");
  return paths;
}

// A file under the data folder, read once: "k3-h200x16-decode-128k.yaml".
inline const std::string& data_file(const std::string& relative) {
  static const std::string root = std::filesystem::path(data().models_dir).parent_path().string();
  static std::map<std::string, std::string> texts;
  auto it = texts.find(relative);
  if (it == texts.end()) it = texts.emplace(relative, read_file(root + "/" + relative)).first;
  return it->second;
}

}  // namespace k3::fuzz
