// Shared loaders for the simulator tests: the repository's scenarios/ folder.
#pragma once

#include "core/hardware.h"
#include "core/model_config.h"
#include "core/scenario.h"

#include <string>

namespace k3::test {

inline DataPaths data() { return DataPaths::resolve(std::string(K3PERF_SOURCE_DIR) + "/scenarios"); }
inline ModelConfig model(const std::string& name) { return load_model_config_by_name(name, data().models_dir); }
inline Hardware hardware(const std::string& name) { return load_hardware_by_name(name, data().hardware_dir); }
inline std::string scenario_path(const std::string& file) {
  return std::string(K3PERF_SOURCE_DIR) + "/scenarios/" + file;
}

}  // namespace k3::test
