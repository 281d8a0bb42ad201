// Writes a safetensors file in one pass with bounded memory: declare every tensor first (that fixes
// the header), then stream each tensor's bytes in declaration order, in one piece or several, then
// finish(). The bytes go to a temporary file beside `path` (core/atomic_file.h), renamed over it by
// finish(), so an interrupted run never leaves a half-written file; a writer destroyed before finish()
// removes its temporary file. Misuse (order, sizes, duplicate names) fails a K3_CHECK; I/O failures are
// InputErrors naming the path.
#pragma once

#include "core/atomic_file.h"
#include "engine/weights/tensor_dtype.h"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace k3::weights {

class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata = {});
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  // Data is laid out in declaration order, without gaps.
  void declare(const std::string& name, TensorDtype dtype, std::vector<int64_t> shape);
  // Appends bytes of `name`: the tensor being written, or the next declared one once the current one
  // is complete. Every tensor, zero-size ones included, is written at least once.
  void write(const std::string& name, std::span<const uint8_t> bytes);
  void finish();

  uint64_t data_size_bytes() const { return data_size_bytes_; }  // sum of the declared tensors' sizes

 private:
  struct Declared {
    std::string name;
    TensorDtype dtype;
    std::vector<int64_t> shape;
    uint64_t begin;  // relative to the data section
    uint64_t end;
  };
  void write_header();

  std::string path_;
  std::map<std::string, std::string> metadata_;
  AtomicFile out_;
  std::vector<Declared> declared_;
  uint64_t data_size_bytes_ = 0;
  size_t tensors_started_ = 0;  // tensors whose bytes have begun; the last one is being written
  uint64_t current_written_bytes_ = 0;
  bool finished_ = false;
};

// Writes model.safetensors.index.json ({"metadata": {"total_size": N}, "weight_map": {name: shard}})
// atomically. total_size_bytes is the sum of the tensors' data sizes, as Hugging Face writes it.
void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& shard_of_tensor,
                             uint64_t total_size_bytes);

}  // namespace k3::weights
