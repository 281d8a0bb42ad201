#include "engine/weights/safetensors_writer.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "engine/weights/safetensors.h"

#include <nlohmann/json.hpp>

namespace k3::weights {

SafetensorsWriter::SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata)
    : path_(path), metadata_(std::move(metadata)), out_(std::move(path)) {}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::declare(const std::string& name, TensorDtype dtype, std::vector<int64_t> shape) {
  K3_CHECK(tensors_started_ == 0 && !finished_, "{}: tensor '{}' declared after writing began", path_, name);
  K3_CHECK(name != "__metadata__", "{}: '__metadata__' is reserved and cannot name a tensor", path_);
  for (const Declared& d : declared_) K3_CHECK(d.name != name, "{}: tensor '{}' declared twice", path_, name);
  const std::optional<int64_t> size_bytes = tensor_size_bytes(dtype, shape);
  K3_CHECK(size_bytes.has_value(), "{}: tensor '{}' has a negative dimension or an overflowing size", path_, name);
  const uint64_t begin = data_size_bytes_;
  data_size_bytes_ += static_cast<uint64_t>(*size_bytes);
  declared_.push_back({name, dtype, std::move(shape), begin, data_size_bytes_});
}

void SafetensorsWriter::write(const std::string& name, std::span<const uint8_t> bytes) {
  K3_CHECK(!finished_, "{}: tensor '{}' written after finish()", path_, name);
  if (tensors_started_ == 0 || name != declared_[tensors_started_ - 1].name) {
    if (tensors_started_ > 0) {
      const Declared& current = declared_[tensors_started_ - 1];
      K3_CHECK(current_written_bytes_ == current.end - current.begin,
               "{}: tensor '{}' got {} of its {} bytes before '{}' was written", path_, current.name,
               current_written_bytes_, current.end - current.begin, name);
    }
    K3_CHECK(tensors_started_ < declared_.size(), "{}: tensor '{}' written but not declared (or written twice)", path_,
             name);
    K3_CHECK(declared_[tensors_started_].name == name, "{}: tensor '{}' written out of order; expected '{}'", path_,
             name, declared_[tensors_started_].name);
    if (tensors_started_ == 0) write_header();
    ++tensors_started_;
    current_written_bytes_ = 0;
  }
  const Declared& current = declared_[tensors_started_ - 1];
  K3_CHECK(current_written_bytes_ + bytes.size() <= current.end - current.begin,
           "{}: tensor '{}' given {} bytes in all, more than its {} bytes", path_, name,
           current_written_bytes_ + bytes.size(), current.end - current.begin);
  out_.write(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  current_written_bytes_ += bytes.size();
}

void SafetensorsWriter::finish() {
  K3_CHECK(!finished_, "{}: finish() called twice", path_);
  if (declared_.empty()) write_header();
  K3_CHECK(tensors_started_ == declared_.size(), "{}: finish() before tensor '{}' was written", path_,
           declared_[tensors_started_ < declared_.size() ? tensors_started_ : 0].name);
  if (!declared_.empty()) {
    const Declared& last = declared_.back();
    K3_CHECK(current_written_bytes_ == last.end - last.begin, "{}: finish() when tensor '{}' has {} of its {} bytes",
             path_, last.name, current_written_bytes_, last.end - last.begin);
  }
  out_.commit();
  finished_ = true;
}

void SafetensorsWriter::write_header() {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  for (const Declared& d : declared_) {
    header[d.name] = {{"dtype", to_string(d.dtype)}, {"shape", d.shape}, {"data_offsets", {d.begin, d.end}}};
  }
  std::string text = header.dump();
  // Readers may map the data section and view it as typed arrays: pad with spaces (allowed by the
  // format) so that the data starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  K3_CHECK(text.size() <= kSafetensorsMaxHeaderBytes, "{}: header of {} bytes is too large", path_, text.size());
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out_.write(std::string_view(reinterpret_cast<const char*>(length), sizeof(length)));
  out_.write(text);
}

void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& shard_of_tensor,
                             uint64_t total_size_bytes) {
  const nlohmann::json index = {{"metadata", {{"total_size", total_size_bytes}}}, {"weight_map", shard_of_tensor}};
  write_file_atomically(path, index.dump(2) + "\n");
}

}  // namespace k3::weights
