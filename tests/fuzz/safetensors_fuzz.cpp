// A safetensors file (engine/weights): the header length, the JSON header, every tensor entry, every tensor's
// bytes read back and decoded. SafetensorsFile maps a path, so the input is written to a file first.
#include "engine/weights/safetensors.h"
#include "engine/weights/tensor_decode.h"
#include "fuzz_target.h"

K3PERF_FUZZ_TARGET(safetensors) {
  const k3::weights::SafetensorsFile file =
      k3::weights::SafetensorsFile::open(k3::fuzz::write_scratch("fuzz.safetensors", data));
  for (const k3::weights::TensorInfo& t : file.tensors()) {
    if (k3::weights::decodes_to_float(t.dtype)) k3::weights::decode_to_float(t.dtype, file.bytes(t));
  }
}
