// Storage formats and compute types, with their exact storage cost.
#pragma once

#include <string>

namespace k3 {

// How a tensor is stored. Bits per element include block scales:
//   mxfp4: E2M1 elements + one E8M0 scale per 32 (OCP MX v1.0)        = 4 + 8/32  = 4.25 bits
//   mxfp8: E4M3 elements + one E8M0 scale per 32                        = 8 + 8/32  = 8.25 bits
//   fp8:   E4M3 with one fp32 scale per 128x128 block (DeepSeek-V3 FP8) = 8 + 32/16384 bits
//   int4:  4-bit integers + one bf16 scale per 32 (compressed-tensors pack-quantized, K2 Thinking)
//                                                                       = 4 + 16/32 = 4.5 bits
enum class StorageFormat { fp32, bf16, fp8, mxfp8, mxfp4, int4 };

// The arithmetic a kernel runs at; picks the hardware peak rate. fp32 is the CUDA-core rate,
// tf32/bf16/fp8/fp4 tensor-core rates.
enum class ComputeType { fp32, bf16, fp8, fp4, tf32 };
inline constexpr int kComputeTypeCount = 5;

double bits_per_element(StorageFormat f);
inline double bytes_per_element(StorageFormat f) { return bits_per_element(f) / 8.0; }

std::string to_string(StorageFormat f);
std::string to_string(ComputeType c);
// Parse helpers return false on an unknown name (callers produce the user-facing error).
bool parse_storage_format(const std::string& name, StorageFormat* out);
bool parse_compute_type(const std::string& name, ComputeType* out);

}  // namespace k3
