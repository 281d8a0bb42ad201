#include "core/dtype.h"

namespace k3 {

double bits_per_element(StorageFormat f) {
  switch (f) {
    case StorageFormat::fp32: return 32.0;
    case StorageFormat::bf16: return 16.0;
    case StorageFormat::fp8: return 8.0 + 32.0 / (128.0 * 128.0);
    case StorageFormat::mxfp8: return 8.0 + 8.0 / 32.0;
    case StorageFormat::mxfp4: return 4.0 + 8.0 / 32.0;
    case StorageFormat::int4: return 4.0 + 16.0 / 32.0;
  }
  return 0.0;
}

std::string to_string(StorageFormat f) {
  switch (f) {
    case StorageFormat::fp32: return "fp32";
    case StorageFormat::bf16: return "bf16";
    case StorageFormat::fp8: return "fp8";
    case StorageFormat::mxfp8: return "mxfp8";
    case StorageFormat::mxfp4: return "mxfp4";
    case StorageFormat::int4: return "int4";
  }
  return "?";
}

std::string to_string(ComputeType c) {
  switch (c) {
    case ComputeType::fp32: return "fp32";
    case ComputeType::bf16: return "bf16";
    case ComputeType::fp8: return "fp8";
    case ComputeType::fp4: return "fp4";
    case ComputeType::tf32: return "tf32";
  }
  return "?";
}

bool parse_storage_format(const std::string& name, StorageFormat* out) {
  for (StorageFormat f : {StorageFormat::fp32, StorageFormat::bf16, StorageFormat::fp8, StorageFormat::mxfp8,
                          StorageFormat::mxfp4, StorageFormat::int4}) {
    if (to_string(f) == name) {
      *out = f;
      return true;
    }
  }
  return false;
}

bool parse_compute_type(const std::string& name, ComputeType* out) {
  for (ComputeType c : {ComputeType::fp32, ComputeType::tf32, ComputeType::bf16, ComputeType::fp8, ComputeType::fp4}) {
    if (to_string(c) == name) {
      *out = c;
      return true;
    }
  }
  return false;
}

}  // namespace k3
