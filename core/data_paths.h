// Where named models and hardware live, and the one lookup of a name or a path: "kimi-k3" is
// scenarios/models/kimi-k3.json, "h200-sxm" is scenarios/hardware/h200-sxm.yaml; anything that
// is a file (or, for hardware, looks like a path) is taken as it is. Every verb, the scenario
// reader and the run library resolve names here.
#pragma once

#include <string>
#include <vector>

namespace k3 {

struct DataPaths {
  std::string models_dir;
  std::string hardware_dir;
  std::string claims_dir;
  std::string prices_dir;
  std::string spec_dir;  // spec/defaults.yaml: what `k3perf spec` assumes
  // --data-dir, else $K3PERF_DATA_DIR, else the source tree's scenarios/ (compiled in).
  static DataPaths resolve(const std::string& data_dir_flag = "");
  // A data folder laid out as scenarios/ is.
  static DataPaths under(const std::string& root);

  std::string model_file(const std::string& name_or_path) const { return find_model_file(name_or_path, models_dir); }
  std::string hardware_file(const std::string& name_or_path) const {
    return find_hardware_file(name_or_path, hardware_dir);
  }

  // A config.json: `name_or_path` when it is a file, else <models_dir>/<name>.json. InputError
  // listing the names in `models_dir` otherwise.
  static std::string find_model_file(const std::string& name_or_path, const std::string& models_dir);
  // A hardware YAML: `name_or_path` when it looks like a path (has a '/' or ends in .yaml/.yml:
  // a missing file is then the loader's error), else <hardware_dir>/<name>.yaml. InputError listing
  // the names in `hardware_dir` otherwise.
  static std::string find_hardware_file(const std::string& name_or_path, const std::string& hardware_dir);
};

// The names a lookup accepts from a folder: the stems of its files ending in `extension` (".json",
// ".yaml"), sorted; empty when the folder does not exist.
std::vector<std::string> list_names(const std::string& dir, const std::string& extension);

}  // namespace k3
