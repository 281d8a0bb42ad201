#include "core/output_header.h"

#include "core/engine_sources.h"
#include "core/version.h"

namespace k3 {

nlohmann::ordered_json output_header(std::string_view format, int version) {
  nlohmann::ordered_json j;
  j["format"] = std::string(format);
  j["version"] = version;
  j["k3perf"] = {{"version", k3perf_version()}, {"engine_sources", engine_sources_hash()}};
  return j;
}

}  // namespace k3
