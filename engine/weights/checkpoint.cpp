#include "engine/weights/checkpoint.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "engine/weights/tensor_decode.h"

#include <algorithm>
#include <filesystem>
#include <map>

namespace k3::weights {
namespace {

namespace fs = std::filesystem;

// A shard path from an index must stay inside the checkpoint directory.
bool is_plain_relative_path(const fs::path& path) {
  if (path.empty() || path.is_absolute()) return false;
  return std::none_of(path.begin(), path.end(), [](const fs::path& part) { return part == ".."; });
}

// Whether `file` (symbolic links resolved) lies inside `dir`: a link out of the checkpoint is refused before
// any of its bytes are read (an error about its header would quote them).
bool resolves_inside(const fs::path& dir, const fs::path& file) {
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return false;
  const fs::path target = fs::canonical(file, ec);
  if (ec) return false;
  const auto [end, rest] = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
  return end == root.end() && rest != target.end();
}

// name -> shard file name, validated against the files on disk.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path, const fs::path& dir) {
  const std::string index_name = index_path.string();
  const JsonNode root = JsonNode::parse(read_file(index_name), index_name);
  const JsonNode weight_map = root["weight_map"];
  if (!weight_map.raw().is_object()) weight_map.fail("expected an object of tensor name -> shard file");
  std::map<std::string, std::string> shard_of_name;
  for (const auto& item : weight_map.raw().items()) {
    const std::string& name = item.key();
    const JsonNode entry = weight_map[name];
    const std::string shard = entry.as_string();
    if (!is_plain_relative_path(shard)) {
      entry.fail(fmt::format("shard '{}' must be a relative path inside the checkpoint directory", shard));
    }
    std::error_code ec;  // a name the file system refuses (too long, …) is a shard that does not exist
    if (!fs::is_regular_file(dir / shard, ec)) entry.fail(fmt::format("shard '{}' does not exist", shard));
    if (!resolves_inside(dir, dir / shard)) {
      entry.fail(fmt::format("shard '{}' is a link to a file outside the checkpoint directory", shard));
    }
    shard_of_name.emplace(name, shard);
  }
  return shard_of_name;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir_or_file) {
  Checkpoint checkpoint;
  checkpoint.source_ = dir_or_file;
  const fs::path source(dir_or_file);
  if (!fs::is_directory(source)) {
    if (!fs::exists(source)) throw InputError(fmt::format("{}: no such file or directory", dir_or_file));
    checkpoint.shards_.push_back(SafetensorsFile::open(dir_or_file));
  } else if (fs::exists(source / kSafetensorsIndexFileName)) {
    const fs::path index_path = source / kSafetensorsIndexFileName;
    const std::map<std::string, std::string> shard_of_name = read_weight_map(index_path, source);
    std::map<std::string, size_t> shard_number;
    for (const auto& [name, shard] : shard_of_name) {
      if (shard_number.emplace(shard, checkpoint.shards_.size()).second) {
        checkpoint.shards_.push_back(SafetensorsFile::open((source / shard).string()));
      }
    }
    for (const auto& [name, shard] : shard_of_name) {
      if (checkpoint.shards_[shard_number.at(shard)].find(name) == nullptr) {
        throw InputError(
            fmt::format("{}: key 'weight_map.{}': tensor is not in shard '{}'", index_path.string(), name, shard));
      }
    }
    for (const auto& [shard, number] : shard_number) {
      for (const TensorInfo& t : checkpoint.shards_[number].tensors()) {
        const auto listed = shard_of_name.find(t.name);
        if (listed == shard_of_name.end() || listed->second != shard) {
          throw InputError(
              fmt::format("{}: shard '{}' holds tensor '{}', which 'weight_map' {}", index_path.string(), shard, t.name,
                          listed == shard_of_name.end() ? std::string("does not list")
                                                        : fmt::format("assigns to shard '{}'", listed->second)));
        }
      }
    }
  } else if (fs::exists(source / kSingleSafetensorsFileName)) {
    if (!resolves_inside(source, source / kSingleSafetensorsFileName)) {
      throw InputError(fmt::format("{}: {} is a link to a file outside the checkpoint directory", dir_or_file,
                                   kSingleSafetensorsFileName));
    }
    checkpoint.shards_.push_back(SafetensorsFile::open((source / kSingleSafetensorsFileName).string()));
  } else {
    throw InputError(fmt::format("{}: directory has neither {} nor {}", dir_or_file, kSafetensorsIndexFileName,
                                 kSingleSafetensorsFileName));
  }

  // Each shard's tensors are in name order already: merge them (no copy of a TensorInfo).
  std::vector<Entry>& all = checkpoint.tensors_;
  for (size_t shard = 0; shard < checkpoint.shards_.size(); ++shard) {
    const SafetensorsFile& file = checkpoint.shards_[shard];
    const auto merged = static_cast<std::ptrdiff_t>(all.size());
    all.reserve(all.size() + file.tensors().size());
    for (const uint32_t i : file.order_by_name()) all.push_back({&file.tensors()[i], static_cast<uint32_t>(shard)});
    std::inplace_merge(all.begin(), all.begin() + merged, all.end(),
                       [](const Entry& a, const Entry& b) { return a.info->name < b.info->name; });
  }
  return checkpoint;
}

const Checkpoint::Entry* Checkpoint::find_entry(std::string_view name) const {
  const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                                   [](const Entry& e, std::string_view n) { return e.info->name < n; });
  return it != tensors_.end() && it->info->name == name ? &*it : nullptr;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  const Entry* e = find_entry(name);
  return e == nullptr ? nullptr : e->info;
}

const Checkpoint::Entry& Checkpoint::entry(const std::string& name) const {
  const Entry* e = find_entry(name);
  if (e == nullptr) throw InputError(fmt::format("{}: no tensor '{}'", source_, name));
  return *e;
}

std::span<const uint8_t> Checkpoint::bytes(const std::string& name) const {
  const Entry& e = entry(name);
  return shards_[e.shard].bytes(*e.info);
}

std::vector<float> Checkpoint::to_float(const std::string& name) const {
  const Entry& e = entry(name);
  const TensorInfo& info = *e.info;
  if (!decodes_to_float(info.dtype)) {
    throw InputError(fmt::format("{}: tensor '{}' is {}, which does not decode to fp32 exactly",
                                 shards_[e.shard].path(), name, to_string(info.dtype)));
  }
  return decode_to_float(info.dtype, shards_[e.shard].bytes(info));
}

}  // namespace k3::weights
