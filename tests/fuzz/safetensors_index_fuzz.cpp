// A checkpoint folder's model.safetensors.index.json (engine/weights/checkpoint): the input is the index, beside
// two fixed shards that hold tensors a, b (model-00001-of-00002.safetensors) and c (model-00002-of-00002...);
// every tensor the index admits is read back. Seeds: seeds/safetensors_index/.
#include "engine/weights/checkpoint.h"
#include "engine/weights/safetensors_writer.h"
#include "fuzz_target.h"

#include <filesystem>
#include <vector>

namespace {

const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    const std::string d = k3::fuzz::scratch_dir() + "/checkpoint";
    std::filesystem::create_directories(d);
    const std::vector<uint8_t> bytes(16, 0x3f);
    k3::weights::SafetensorsWriter first(d + "/model-00001-of-00002.safetensors");
    first.declare("a", k3::weights::TensorDtype::bf16, {2, 3});
    first.declare("b", k3::weights::TensorDtype::f32, {2});
    first.write("a", std::span(bytes).first(12));
    first.write("b", std::span(bytes).first(8));
    first.finish();
    k3::weights::SafetensorsWriter second(d + "/model-00002-of-00002.safetensors");
    second.declare("c", k3::weights::TensorDtype::u8, {4});
    second.write("c", std::span(bytes).first(4));
    second.finish();
    return d;
  }();
  return dir;
}

}  // namespace

K3PERF_FUZZ_TARGET(safetensors_index) {
  const std::string& dir = checkpoint_dir();
  k3::fuzz::write_scratch("checkpoint/model.safetensors.index.json", data);
  const k3::weights::Checkpoint checkpoint = k3::weights::Checkpoint::open(dir);
  for (const k3::weights::TensorInfo& t : checkpoint.tensors()) checkpoint.to_float(t.name);
}
