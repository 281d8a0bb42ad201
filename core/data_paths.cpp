#include "core/data_paths.h"

#include "core/comma_list.h"
#include "core/error.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace k3 {

namespace fs = std::filesystem;

DataPaths DataPaths::under(const std::string& root) {
  return DataPaths{root + "/models", root + "/hardware", root + "/claims", root + "/prices", root + "/spec"};
}

DataPaths DataPaths::resolve(const std::string& data_dir_flag) {
  std::string root = data_dir_flag;
  if (root.empty()) {
    if (const char* env = std::getenv("K3PERF_DATA_DIR")) root = env;
  }
#ifdef K3PERF_SOURCE_DIR
  if (root.empty()) root = std::string(K3PERF_SOURCE_DIR) + "/scenarios";
#endif
  if (root.empty()) root = "scenarios";
  if (!fs::is_directory(root)) {
    throw InputError(
        fmt::format("data directory '{}' does not exist (set --data-dir or K3PERF_DATA_DIR "
                    "to the project's scenarios/ folder)",
                    root));
  }
  return under(root);
}

std::vector<std::string> list_names(const std::string& dir, const std::string& extension) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == extension) names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string DataPaths::find_model_file(const std::string& name_or_path, const std::string& models_dir) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  const fs::path candidate = fs::path(models_dir) / (name_or_path + ".json");
  if (fs::is_regular_file(candidate, ec)) return candidate.string();
  throw InputError(fmt::format("unknown model '{}': not a file, and not one of [{}] in {}", name_or_path,
                               comma_list(list_names(models_dir, ".json")), models_dir));
}

std::string DataPaths::find_hardware_file(const std::string& name_or_path, const std::string& hardware_dir) {
  const fs::path p(name_or_path);
  if (name_or_path.find('/') != std::string::npos || p.extension() == ".yaml" || p.extension() == ".yml") {
    return name_or_path;
  }
  const fs::path file = fs::path(hardware_dir) / (name_or_path + ".yaml");
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file.string();
  const std::vector<std::string> names = list_names(hardware_dir, ".yaml");
  throw InputError(fmt::format("unknown hardware '{}': no {}; available in {}: {} (or give a path to a .yaml file)",
                               name_or_path, file.string(), hardware_dir, names.empty() ? "none" : comma_list(names)));
}

}  // namespace k3
