// A safetensors file (engine/weights): the header length, the JSON header, every tensor entry, every tensor's
// bytes read back. The input is written to a file once per run, as SafetensorsFile maps a path.
#include "core/error.h"
#include "engine/weights/safetensors.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

uint64_t k3perf_fuzz_byte_sum = 0;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/k3perf_fuzz_" + std::to_string(::getpid()) + ".safetensors";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const k3::weights::SafetensorsFile file = k3::weights::SafetensorsFile::open(path);
    uint64_t sum = 0;
    for (const k3::weights::TensorInfo& t : file.tensors()) {
      for (const uint8_t b : file.bytes(t)) sum += b;
    }
    k3perf_fuzz_byte_sum = sum;  // kept, so the reads are not optimised away
  } catch (const k3::InputError&) {
  }
  return 0;
}
