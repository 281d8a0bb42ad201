// A whole checkpoint: the safetensors shards of a Hugging Face model directory, seen as one set of
// named tensors. `open` accepts
//   - a directory with model.safetensors.index.json ("weight_map": tensor name -> shard file),
//   - a directory with a single model.safetensors,
//   - one .safetensors file.
// With an index, the index and the shards must agree exactly: every listed tensor is in its shard
// and every shard tensor is listed; errors name the index file and the key.
#pragma once

#include "engine/weights/safetensors.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace k3::weights {

inline constexpr const char* kSafetensorsIndexFileName = "model.safetensors.index.json";
inline constexpr const char* kSingleSafetensorsFileName = "model.safetensors";

class Checkpoint {
  struct Entry;

 public:
  static Checkpoint open(const std::string& dir_or_file);

  // Every shard's tensors, sorted by name: a view of them (the shards hold them), for range-for and size().
  // Written out rather than std::views::transform, which Clang 14 cannot compile with libstdc++ 12.
  class TensorRange {
   public:
    class iterator {
     public:
      explicit iterator(const Entry* e) : e_(e) {}
      const TensorInfo& operator*() const;
      iterator& operator++() {
        ++e_;
        return *this;
      }
      bool operator==(const iterator& o) const { return e_ == o.e_; }

     private:
      const Entry* e_;
    };
    TensorRange(const Entry* begin, const Entry* end) : begin_(begin), end_(end) {}
    iterator begin() const { return iterator(begin_); }
    iterator end() const { return iterator(end_); }
    std::size_t size() const { return static_cast<std::size_t>(end_ - begin_); }
    bool empty() const { return begin_ == end_; }

   private:
    const Entry *begin_, *end_;
  };

  const std::string& source() const { return source_; }  // what open() was given
  TensorRange tensors() const { return {tensors_.data(), tensors_.data() + tensors_.size()}; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // InputError naming the checkpoint when the tensor is absent; the span lives as long as this object.
  std::span<const uint8_t> bytes(const std::string& name) const;
  // BF16, F16, F32, F8_E4M3 (E4M3 codec of mx_format.h), I8 and U8 widened to fp32; InputError for I32.
  std::vector<float> to_float(const std::string& name) const;

 private:
  struct Entry {
    const TensorInfo* info;  // in shards_[shard]
    uint32_t shard;
  };
  friend class TensorRange::iterator;
  const Entry* find_entry(std::string_view name) const;  // nullptr when absent
  const Entry& entry(const std::string& name) const;     // InputError when absent

  std::string source_;
  std::vector<SafetensorsFile> shards_;
  std::vector<Entry> tensors_;  // by name
};

inline const TensorInfo& Checkpoint::TensorRange::iterator::operator*() const { return *e_->info; }

}  // namespace k3::weights
