#include "engine/weights/safetensors.h"

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string_view>
#include <tuple>

namespace k3::weights {
namespace {

using nlohmann::json;

constexpr uint64_t kHeaderLengthBytes = 8;
// The shortest entry, `"":{"dtype":"U8","shape":[],"data_offsets":[0,0]},`: a header of N bytes holds at most
// N / 50 + 1 tensors, room reserved at once (pages never written are never resident) instead of regrown.
constexpr uint64_t kShortestEntryBytes = 50;
// Real headers nest three levels; a limit keeps a hostile "[[[[..." from costing gigabytes.
constexpr int kMaxJsonNesting = static_cast<int>(limit::header_nesting.value);

[[noreturn]] void fail_header(const std::string& path, const std::string& what) {
  throw InputError(fmt::format("{}: header: {}", path, what));
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, const std::string& what) {
  throw InputError(fmt::format("{}: tensor '{}': {}", path, name, what));
}

std::string brief(const json& value) { return quoted_excerpt(value.dump()); }

uint64_t read_u64_little_endian(const uint8_t* p) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& value) {
  if (!value.is_object()) fail_header(path, fmt::format("'__metadata__' must be an object, got {}", brief(value)));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail_header(path, fmt::format("'__metadata__' value of '{}' must be a string, got {}", key, brief(item)));
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// Validates one header entry; offsets come back relative to the data section.
TensorInfo parse_tensor_entry(const std::string& path, const std::string& name, const json& entry,
                              uint64_t data_section_bytes) {
  if (!entry.is_object()) {
    fail_tensor(path, name, fmt::format("expected an object with dtype, shape, data_offsets; got {}", brief(entry)));
  }
  TensorInfo info;
  info.name = name;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) fail_tensor(path, name, "'dtype' must be a string");
  if (!parse_tensor_dtype(dtype_it->get<std::string>(), &info.dtype)) {
    fail_tensor(path, name,
                fmt::format("unknown dtype '{}' (expected one of {})", dtype_it->get<std::string>(),
                            known_tensor_dtype_names()));
  }

  const auto shape_it = entry.find("shape");
  const bool shape_is_list = shape_it != entry.end() && shape_it->is_array();
  if (shape_is_list) {
    for (const json& dim : *shape_it) {
      // Non-negative integers parse as unsigned; a negative one parses as signed, 2.0 as a float.
      if (!dim.is_number_unsigned() ||
          dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        info.shape.clear();
        break;
      }
      info.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    }
  }
  if (!shape_is_list || info.shape.size() != shape_it->size()) {
    fail_tensor(path, name,
                fmt::format("'shape' must be a list of non-negative integers, got {}",
                            shape_it == entry.end() ? std::string("nothing") : brief(*shape_it)));
  }

  const auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    fail_tensor(path, name,
                fmt::format("'data_offsets' must be two non-negative integers [begin, end], got {}",
                            offsets_it == entry.end() ? std::string("nothing") : brief(*offsets_it)));
  }
  info.begin = (*offsets_it)[0].get<uint64_t>();
  info.end = (*offsets_it)[1].get<uint64_t>();
  if (info.begin > info.end) {
    fail_tensor(path, name, fmt::format("data_offsets begin {} is after end {}", info.begin, info.end));
  }
  if (info.end > data_section_bytes) {
    fail_tensor(path, name,
                fmt::format("data_offsets end {} is beyond the data section ({} bytes)", info.end, data_section_bytes));
  }
  const std::optional<int64_t> expected_bytes = tensor_size_bytes(info.dtype, info.shape);
  if (!expected_bytes) {
    fail_tensor(path, name,
                fmt::format("shape [{}] of {} overflows a 64-bit byte count", fmt::join(info.shape, ", "),
                            to_string(info.dtype)));
  }
  if (static_cast<uint64_t>(*expected_bytes) != info.end - info.begin) {
    fail_tensor(
        path, name,
        fmt::format("data_offsets [{}, {}] span {} bytes, but shape [{}] of {} needs {} bytes", info.begin, info.end,
                    info.end - info.begin, fmt::join(info.shape, ", "), to_string(info.dtype), *expected_bytes));
  }
  return info;
}

void check_no_overlap(const std::string& path, const std::vector<TensorInfo>& sorted_by_begin, uint64_t data_start) {
  const TensorInfo* furthest = nullptr;  // the non-empty tensor reaching furthest so far
  for (const TensorInfo& t : sorted_by_begin) {
    if (t.begin == t.end) continue;  // an empty range overlaps nothing
    if (furthest != nullptr && t.begin < furthest->end) {
      throw InputError(fmt::format("{}: tensors '{}' and '{}' overlap (data_offsets [{}, {}] and [{}, {}])", path,
                                   furthest->name, t.name, furthest->begin - data_start, furthest->end - data_start,
                                   t.begin - data_start, t.end - data_start));
    }
    if (furthest == nullptr || t.end > furthest->end) furthest = &t;
  }
}

}  // namespace

int64_t TensorInfo::elements() const {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;  // validated against overflow when read or declared
  return count;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.file_ = MappedFile::open(path);
  const std::span<const uint8_t> bytes = file.file_.bytes();
  if (bytes.size() < kHeaderLengthBytes) {
    fail_header(path, fmt::format("file is {} bytes, shorter than the 8-byte header length", bytes.size()));
  }
  const uint64_t header_bytes = read_u64_little_endian(bytes.data());
  if (header_bytes > kSafetensorsMaxHeaderBytes) {
    fail_header(path,
                fmt::format("length {} bytes exceeds the limit of {} bytes", header_bytes, kSafetensorsMaxHeaderBytes));
  }
  if (header_bytes > bytes.size() - kHeaderLengthBytes) {
    fail_header(path,
                fmt::format("length {} bytes runs past the end of the file ({} bytes)", header_bytes, bytes.size()));
  }
  const uint64_t data_start = kHeaderLengthBytes + header_bytes;
  const uint64_t data_section_bytes = bytes.size() - data_start;

  // One entry at a time (a header of a million tensors is never one DOM); duplicated names (a second tensor of one
  // name would shadow the first) and deep nesting are refused by the reader.
  file.tensors_.reserve(header_bytes / kShortestEntryBytes + 1);
  parse_json_members(std::string_view(reinterpret_cast<const char*>(bytes.data() + kHeaderLengthBytes), header_bytes),
                     path + ": header", kMaxJsonNesting, [&](const std::string& name, const json& entry) {
                       if (name == "__metadata__") {
                         file.metadata_ = parse_metadata(path, entry);
                         return;
                       }
                       TensorInfo info = parse_tensor_entry(path, name, entry, data_section_bytes);
                       info.begin += data_start;
                       info.end += data_start;
                       file.tensors_.push_back(std::move(info));
                     });
  const auto by_offset = [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  };
  // Writers put the entries in the order of their data: then the sort is one pass.
  if (!std::is_sorted(file.tensors_.begin(), file.tensors_.end(), by_offset)) {
    std::sort(file.tensors_.begin(), file.tensors_.end(), by_offset);
  }
  check_no_overlap(path, file.tensors_, data_start);
  // Sorted as (name, position) pairs: each comparison reads the two names and nothing else.
  std::vector<std::pair<std::string_view, uint32_t>> names;
  names.reserve(file.tensors_.size());
  for (const TensorInfo& t : file.tensors_) names.emplace_back(t.name, static_cast<uint32_t>(names.size()));
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  file.by_name_.reserve(names.size());
  for (const auto& [name, i] : names) file.by_name_.push_back(i);
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                                   [this](uint32_t i, std::string_view n) { return tensors_[i].name < n; });
  return it != by_name_.end() && tensors_[*it].name == name ? &tensors_[*it] : nullptr;
}

std::span<const uint8_t> SafetensorsFile::bytes(const TensorInfo& info) const {
  K3_CHECK(&info >= tensors_.data() && &info < tensors_.data() + tensors_.size() && info.begin <= info.end &&
               info.end <= file_.size_bytes(),
           "tensor '{}' [{}, {}) is not one of the tensors of '{}' ({} bytes)", info.name, info.begin, info.end, path(),
           file_.size_bytes());
  return file_.bytes().subspan(info.begin, info.end - info.begin);
}

}  // namespace k3::weights
