#include "profiler/trace/prefetch_source.h"

#include "core/error.h"

#include <algorithm>
#include <cstring>

namespace k3::profiler {

PrefetchSource::PrefetchSource(ByteSource& ahead, std::size_t chunk_bytes, std::size_t chunks)
    : ahead_(ahead), chunks_(chunks, std::vector<char>(chunk_bytes)), chunk_sizes_(chunks, 0) {
  K3_CHECK(chunk_bytes > 0 && chunks >= 2, "prefetching needs 2 chunks or more, of 1 byte or more");
  thread_ = std::thread([this] { fill_chunks(); });
}

PrefetchSource::~PrefetchSource() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void PrefetchSource::fill_chunks() {
  try {
    while (true) {
      std::size_t index = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || filled_ - consumed_ < chunks_.size(); });
        if (stopping_) return;
        index = filled_ % chunks_.size();
      }
      // The chunk is the thread's until it is published: fill it whole, or to the end of the data.
      std::vector<char>& chunk = chunks_[index];
      std::size_t size = 0;
      while (size < chunk.size()) {
        const std::size_t n = ahead_.read(chunk.data() + size, chunk.size() - size);
        if (n == 0) break;
        size += n;
      }
      {
        const std::lock_guard<std::mutex> lock(mutex_);
        chunk_sizes_[index] = size;
        if (size > 0) ++filled_;
        ended_ = size < chunk.size();
      }
      changed_.notify_all();
      if (size < chunk.size()) return;
    }
  } catch (...) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      ended_ = true;
    }
    changed_.notify_all();
  }
}

std::size_t PrefetchSource::read(char* out, std::size_t capacity) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (consumed_ < filled_) {
      const std::size_t index = consumed_ % chunks_.size();
      const std::size_t n = std::min(capacity, chunk_sizes_[index] - offset_);
      lock.unlock();  // the chunk stays read()'s until consumed_ passes it
      std::memcpy(out, chunks_[index].data() + offset_, n);
      lock.lock();
      offset_ += n;
      if (offset_ == chunk_sizes_[index]) {
        offset_ = 0;
        ++consumed_;
        lock.unlock();
        changed_.notify_all();
      }
      return n;
    }
    if (ended_) {
      if (error_) std::rethrow_exception(error_);
      return 0;
    }
    changed_.wait(lock);
  }
}

}  // namespace k3::profiler
