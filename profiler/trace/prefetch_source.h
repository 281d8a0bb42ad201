// Reads another ByteSource ahead on a thread of its own, so that inflating a .json.gz (or reading a
// file) overlaps parsing it: on 2 cores a read then takes about the longer of the two, not their sum.
// Memory: `chunks` buffers of `chunk_bytes`. An error of the other source is rethrown by read() where
// its data ends.
#pragma once

#include "profiler/trace/byte_source.h"

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace k3::profiler {

class PrefetchSource final : public ByteSource {
 public:
  explicit PrefetchSource(ByteSource& ahead, std::size_t chunk_bytes = std::size_t{1} << 20, std::size_t chunks = 4);
  ~PrefetchSource() override;  // stops the thread and waits for it
  PrefetchSource(const PrefetchSource&) = delete;
  PrefetchSource& operator=(const PrefetchSource&) = delete;
  std::size_t read(char* out, std::size_t capacity) override;

 private:
  void fill_chunks();  // the thread

  ByteSource& ahead_;
  std::vector<std::vector<char>> chunks_;  // a ring: chunk i holds the i-th filled modulo its size
  std::vector<std::size_t> chunk_sizes_;
  std::size_t filled_ = 0;    // chunks filled by the thread
  std::size_t consumed_ = 0;  // chunks read to the end by read()
  std::size_t offset_ = 0;    // in the chunk read now
  bool ended_ = false;        // the thread has filled its last chunk (or failed)
  bool stopping_ = false;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace k3::profiler
