// read_floor (bench/gpu/read_floor.h): the XOR of its sink is the XOR of every 32-bit word of the chunks it was asked
// to read, through a shuffled index and in order, at chunk sizes that do not divide its wave's shares — so each word
// was read exactly once (a word read twice or skipped would change it) — and bad arguments are refused.
#include "bench/gpu/read_floor.h"
#include "tests/kernels/gpu_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

using k3::gpu_test::DeviceBuffer;

// XOR of the words of chunks index[0 … chunks) (or 0 … chunks) of `chunk_words` words each.
uint32_t host_xor(const std::vector<uint32_t>& data, const std::vector<int32_t>& index, int64_t chunk_words,
                  int64_t chunks) {
  uint32_t x = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = (index.empty() ? c : index[size_t(c)]) * chunk_words;
    for (int64_t w = 0; w < chunk_words; ++w) x ^= data[size_t(first + w)];
  }
  return x;
}

uint32_t device_xor(const DeviceBuffer<uint32_t>& data, const int32_t* index, int64_t chunk_bytes, int64_t chunks) {
  const int blocks = k3::bench::read_floor_blocks();
  DeviceBuffer<uint32_t> sink(std::vector<uint32_t>(size_t(blocks), 0u));
  EXPECT_EQ(k3::bench::read_floor(data.get(), index, chunk_bytes, chunks, sink.get(), nullptr), cudaSuccess);
  const std::vector<uint32_t> words = sink.download();
  return std::accumulate(words.begin(), words.end(), 0u, [](uint32_t a, uint32_t b) { return a ^ b; });
}

TEST(GpuReadFloor, ReadsEveryWordOnceThroughAnIndexAndInOrder) {
  std::mt19937 rng(20261130);
  // (chunk bytes, chunks in the buffer, chunks read): a 64-token page of the MLA cache, odd sizes, one long run.
  const int64_t shapes[][3] = {{73728, 37, 29}, {16, 1001, 777}, {48, 333, 333}, {4000016, 3, 1}, {208, 4096, 4095}};
  for (const auto& shape : shapes) {
    const int64_t chunk_bytes = shape[0], available = shape[1], chunks = shape[2], words = chunk_bytes / 4;
    std::vector<uint32_t> data(size_t(words * available));
    for (uint32_t& w : data) w = rng();
    std::vector<int32_t> pages(static_cast<size_t>(available));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    pages.resize(size_t(chunks));
    const uint32_t expected_indexed = host_xor(data, pages, words, chunks);
    const uint32_t expected_in_order = host_xor(data, {}, words, chunks);
    ASSERT_NE(expected_indexed, 0u);  // random words: a zero here would make the check blind
    K3_REQUIRE_GPU();
    const DeviceBuffer<uint32_t> device_data(data);
    const DeviceBuffer<int32_t> device_index(pages);
    EXPECT_EQ(device_xor(device_data, device_index.get(), chunk_bytes, chunks), expected_indexed)
        << chunks << " chunks of " << chunk_bytes << " bytes through the index";
    EXPECT_EQ(device_xor(device_data, nullptr, chunk_bytes, chunks), expected_in_order)
        << chunks << " chunks of " << chunk_bytes << " bytes in order";
  }
}

TEST(GpuReadFloor, RefusesBadArguments) {
  K3_REQUIRE_GPU();
  const DeviceBuffer<uint32_t> data(std::vector<uint32_t>(64, 1u));
  DeviceBuffer<uint32_t> sink(std::vector<uint32_t>(size_t(k3::bench::read_floor_blocks()), 0u));
  EXPECT_EQ(k3::bench::read_floor(data.get(), nullptr, 24, 2, sink.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(k3::bench::read_floor(data.get(), nullptr, 0, 2, sink.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(k3::bench::read_floor(data.get(), nullptr, 16, 0, sink.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(k3::bench::read_floor(nullptr, nullptr, 16, 2, sink.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(k3::bench::read_floor(data.get(), nullptr, 16, 2, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(
      k3::bench::read_floor(reinterpret_cast<const uint8_t*>(data.get()) + 4, nullptr, 16, 2, sink.get(), nullptr),
      cudaErrorInvalidValue);
}

}  // namespace
