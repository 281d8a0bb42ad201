// PrefetchSource hands over exactly the bytes of the source it reads ahead, in order, whatever the
// chunk sizes on either side; an error of that source comes after the bytes read before it; and a
// reader that stops early leaves without waiting for the rest.
#include "profiler/trace/prefetch_source.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <string>

namespace k3::profiler {
namespace {

std::string read_all(ByteSource& in, std::size_t read_bytes) {
  std::string out, chunk(read_bytes, '\0');
  while (const std::size_t n = in.read(chunk.data(), chunk.size())) out.append(chunk, 0, n);
  return out;
}

std::string some_bytes(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<char>((i * 131 + i / 7) % 256);
  return s;
}

TEST(PrefetchSource, SameBytesWhateverTheChunks) {
  const std::string data = some_bytes(20'011);
  for (const std::size_t source_chunk : {std::size_t{1}, std::size_t{4096}, data.size()}) {
    for (const std::size_t prefetch_chunk : {std::size_t{7}, std::size_t{65536}}) {
      for (const std::size_t read_chunk : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
        SCOPED_TRACE(testing::Message() << source_chunk << " " << prefetch_chunk << " " << read_chunk);
        StringSource source(data, source_chunk);
        PrefetchSource ahead(source, prefetch_chunk, 2);
        EXPECT_EQ(read_all(ahead, read_chunk), data);
        char c;
        EXPECT_EQ(ahead.read(&c, 1), 0u);  // stays at the end
      }
    }
  }
  StringSource empty("");
  PrefetchSource ahead(empty);
  EXPECT_EQ(read_all(ahead, 10), "");
}

// The first `good` bytes of a string, then InputError.
class FailingSource final : public ByteSource {
 public:
  FailingSource(std::string data, std::size_t good) : data_(std::move(data)), good_(good) {}
  std::size_t read(char* out, std::size_t capacity) override {
    if (offset_ == good_) throw InputError("failing.gz: corrupt gzip data");
    const std::size_t n = std::min({capacity, good_ - offset_, std::size_t{7}});
    data_.copy(out, n, offset_);
    offset_ += n;
    return n;
  }

 private:
  std::string data_;
  std::size_t good_, offset_ = 0;
};

TEST(PrefetchSource, AnErrorComesAfterTheBytesBeforeIt) {
  const std::string data = some_bytes(5000);
  FailingSource source(data, 3210);
  PrefetchSource ahead(source, 100, 3);
  std::string got, chunk(64, '\0');
  try {
    while (const std::size_t n = ahead.read(chunk.data(), chunk.size())) got.append(chunk, 0, n);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "failing.gz: corrupt gzip data");
  }
  EXPECT_EQ(got, data.substr(0, 3200));  // the whole 100-byte chunks before the failing read
}

TEST(PrefetchSource, StoppingEarlyEndsTheThread) {
  const std::string data = some_bytes(1'000'000);
  StringSource source(data, 10);
  {
    PrefetchSource ahead(source, 1000, 2);
    char c;
    ASSERT_EQ(ahead.read(&c, 1), 1u);
    EXPECT_EQ(c, data[0]);
  }  // the destructor stops the thread with most of the data unread
  char rest[16];
  EXPECT_GT(source.read(rest, sizeof rest), 0u);
}

}  // namespace
}  // namespace k3::profiler
