// Safetensors reading, writing and checkpoints, against bytes written by hand; hostile files must
// give an InputError naming the file and the tensor (or "header"), never a crash.
#include "engine/weights/safetensors.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/safetensors_writer.h"

#include "expect_input_error.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

namespace k3::weights {
namespace {

namespace fs = std::filesystem;

static_assert(!std::is_copy_constructible_v<SafetensorsFile> && std::is_nothrow_move_constructible_v<MappedFile>);
static_assert(std::is_move_constructible_v<SafetensorsFile> && std::is_move_assignable_v<SafetensorsFile>);

// A fresh directory under the system temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int created = 0;
    path_ = fs::temp_directory_path() / fmt::format("k3perf_{}_{}_{}",
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                                    ::getpid(), created++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> le64(uint64_t value) {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(value >> (8 * i)));
  return bytes;
}

// length field, header text, data
std::vector<uint8_t> safetensors_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes = le64(header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  TempDir dir;
  const std::string path = dir.file("hand.safetensors");
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"U8","shape":[3],"data_offsets":[8,11]},"s":{"dtype":"I32","shape":[],"data_offsets":[11,15]},)"
      R"("z":{"dtype":"BF16","shape":[0,5],"data_offsets":[15,15]}})";
  std::vector<uint8_t> data = bytes_of(std::vector<float>{1.0f, -2.0f});
  data.insert(data.end(), {7, 8, 9});
  const std::vector<uint8_t> scalar = bytes_of(std::vector<int32_t>{-5});
  data.insert(data.end(), scalar.begin(), scalar.end());
  write_bytes(path, safetensors_bytes(header, data));

  const SafetensorsFile file = SafetensorsFile::open(path);
  const uint64_t data_start = 8 + header.size();
  ASSERT_EQ(file.tensors().size(), 4u);
  EXPECT_EQ(file.tensors()[0].name, "b");  // data order, not name order
  EXPECT_EQ(file.tensors()[1].name, "a");
  EXPECT_EQ(file.tensors()[2].name, "s");
  EXPECT_EQ(file.tensors()[3].name, "z");
  const TensorInfo* a = file.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, TensorDtype::u8);
  EXPECT_EQ(a->shape, std::vector<int64_t>{3});
  EXPECT_EQ(a->begin, data_start + 8);
  EXPECT_EQ(a->end, data_start + 11);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(a->elements(), 3);
  EXPECT_EQ(file.find("s")->elements(), 1);  // a scalar
  EXPECT_EQ(file.find("z")->elements(), 0);
  EXPECT_EQ(file.find("missing"), nullptr);
  const std::span<const uint8_t> a_bytes = file.bytes(*a);
  EXPECT_EQ(std::vector<uint8_t>(a_bytes.begin(), a_bytes.end()), (std::vector<uint8_t>{7, 8, 9}));
  float b[2];
  std::memcpy(b, file.bytes(*file.find("b")).data(), sizeof(b));
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -2.0f);
  EXPECT_TRUE(file.bytes(*file.find("z")).empty());
  const TensorInfo copy = *a;  // bytes() hands out only the file's own entries
  EXPECT_THROW(file.bytes(copy), Error);
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));

  SafetensorsFile moved = SafetensorsFile::open(path);
  const SafetensorsFile target = std::move(moved);  // the mapping moves with the object
  EXPECT_EQ(target.bytes(*target.find("a"))[2], 9);
}

TEST(Safetensors, DtypeNamesAndSizes) {
  const std::pair<TensorDtype, std::pair<const char*, int64_t>> expected[] = {
      {TensorDtype::bf16, {"BF16", 2}},       {TensorDtype::f16, {"F16", 2}}, {TensorDtype::f32, {"F32", 4}},
      {TensorDtype::u8, {"U8", 1}},           {TensorDtype::i8, {"I8", 1}},   {TensorDtype::i32, {"I32", 4}},
      {TensorDtype::f8_e4m3, {"F8_E4M3", 1}},
  };
  for (const auto& [dtype, name_and_size] : expected) {
    EXPECT_EQ(to_string(dtype), name_and_size.first);
    EXPECT_EQ(element_size_bytes(dtype), name_and_size.second);
    TensorDtype parsed = TensorDtype::u8;
    ASSERT_TRUE(parse_tensor_dtype(name_and_size.first, &parsed));
    EXPECT_EQ(parsed, dtype);
  }
  TensorDtype unused{};
  EXPECT_FALSE(parse_tensor_dtype("F64", &unused));
  EXPECT_FALSE(parse_tensor_dtype("bf16", &unused));  // names are case-sensitive, as in the format
  const std::vector<int64_t> huge{int64_t{1} << 32, int64_t{1} << 31};
  EXPECT_EQ(element_count(huge), std::nullopt);         // 2^63 does not fit in int64
  EXPECT_EQ(element_count(std::vector<int64_t>{}), 1);  // a scalar
  EXPECT_EQ(tensor_size_bytes(TensorDtype::f32, std::vector<int64_t>{int64_t{1} << 61}), std::nullopt);
  EXPECT_EQ(tensor_size_bytes(TensorDtype::bf16, std::vector<int64_t>{3, 0, 7}), 0);
  EXPECT_EQ(element_count(std::vector<int64_t>{2, -1}), std::nullopt);
}

TEST(SafetensorsWriter, WritesTheExactBytes) {
  TempDir dir;
  const std::string path = dir.file("one.safetensors");
  SafetensorsWriter writer(path, {{"k", "v"}});
  writer.declare("t", TensorDtype::f32, {1});
  writer.write("t", bytes_of(std::vector<float>{1.5f}));
  writer.finish();

  std::string header = R"({"__metadata__":{"k":"v"},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ASSERT_EQ(header.size(), 79u);
  header += " ";  // padded with a space to 80, so the data starts 8-byte aligned
  EXPECT_EQ(read_bytes(path), safetensors_bytes(header, {0x00, 0x00, 0xC0, 0x3F}));
}

TEST(SafetensorsWriter, RoundTripsSeveralDtypesZeroSizeTensorsAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"producer", "k3perf test"}};
  struct Tensor {
    std::string name;
    TensorDtype dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  const std::vector<Tensor> tensors{
      {"w.bf16", TensorDtype::bf16, {2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
      {"w.f16", TensorDtype::f16, {1}, {0x00, 0x3C}},
      {"empty", TensorDtype::f32, {0, 4}, {}},
      {"w.f32", TensorDtype::f32, {2}, bytes_of(std::vector<float>{0.25f, -8.0f})},
      {"scalar.i32", TensorDtype::i32, {}, bytes_of(std::vector<int32_t>{-123456})},
      {"q.u8", TensorDtype::u8, {5}, {0, 1, 2, 254, 255}},
      {"q.i8", TensorDtype::i8, {3}, {0x80, 0x7F, 0xFF}},
      {"q.f8", TensorDtype::f8_e4m3, {2, 2}, {0x38, 0x7E, 0x01, 0xB8}},
  };
  {
    SafetensorsWriter writer(path, metadata);
    for (const Tensor& t : tensors) writer.declare(t.name, t.dtype, t.shape);
    EXPECT_EQ(writer.data_size_bytes(), 12u + 2 + 0 + 8 + 4 + 5 + 3 + 4);
    for (const Tensor& t : tensors) {
      if (t.name == "w.bf16") {  // streamed in two pieces
        writer.write(t.name, std::span(t.bytes).first(5));
        writer.write(t.name, std::span(t.bytes).subspan(5));
      } else {
        writer.write(t.name, t.bytes);
      }
    }
    EXPECT_FALSE(fs::exists(path)) << "the target appears only on finish()";
    writer.finish();
  }
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  const std::vector<uint8_t> raw = read_bytes(path);
  const uint64_t header_bytes = raw[0] | (uint64_t{raw[1]} << 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);
  for (const Tensor& t : tensors) {
    const TensorInfo* info = file.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype) << t.name;
    EXPECT_EQ(info->shape, t.shape) << t.name;
    const std::span<const uint8_t> bytes = file.bytes(*info);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), t.bytes) << t.name;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "no temporary file left";
}

TEST(SafetensorsWriter, WritesAFileWithoutTensors) {
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  SafetensorsWriter writer(path);
  writer.finish();
  EXPECT_EQ(read_bytes(path), safetensors_bytes("{}      ", {}));
  EXPECT_TRUE(SafetensorsFile::open(path).tensors().empty());
}

TEST(SafetensorsWriter, RefusesMisuse) {
  TempDir dir;
  const std::vector<uint8_t> four(4, 0), eight(8, 0);
  {
    SafetensorsWriter writer(dir.file("a.safetensors"));
    writer.declare("x", TensorDtype::f32, {1});
    writer.declare("y", TensorDtype::f32, {2});
    EXPECT_THROW(writer.declare("x", TensorDtype::u8, {1}), k3::Error);             // declared twice
    EXPECT_THROW(writer.declare("__metadata__", TensorDtype::u8, {1}), k3::Error);  // reserved
    EXPECT_THROW(writer.declare("neg", TensorDtype::u8, {-1}), k3::Error);
    EXPECT_THROW(writer.write("y", eight), k3::Error);  // out of order
    EXPECT_THROW(writer.write("x", eight), k3::Error);  // too many bytes
    writer.write("x", four);
    EXPECT_THROW(writer.declare("z", TensorDtype::u8, {1}), k3::Error);  // declare after write
    EXPECT_THROW(writer.write("x", four), k3::Error);                    // x is complete
    EXPECT_THROW(writer.finish(), k3::Error);                            // y not written
    writer.write("y", four);
    EXPECT_THROW(writer.write("q", four), k3::Error);  // y incomplete, q unknown
    EXPECT_THROW(writer.finish(), k3::Error);          // y half written
  }
  EXPECT_TRUE(fs::is_empty(dir.path())) << "an unfinished writer removes its temporary file";
  test::expect_input_error([&] { SafetensorsWriter writer(dir.file("no/such/dir/x.safetensors")); },
                           {"no/such/dir", "does not exist"});
}

TEST(SafetensorsWriter, UnfinishedWriterLeavesTheOldFileAlone) {
  TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  write_bytes(path, {1, 2, 3});
  {
    SafetensorsWriter writer(path);
    writer.declare("x", TensorDtype::u8, {2});
    writer.write("x", std::vector<uint8_t>{9});
  }
  EXPECT_EQ(read_bytes(path), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

// Writes one shard with the writer.
void write_shard(
    const std::string& path,
    const std::vector<std::tuple<std::string, TensorDtype, std::vector<int64_t>, std::vector<uint8_t>>>& tensors) {
  SafetensorsWriter writer(path);
  for (const auto& [name, dtype, shape, bytes] : tensors) writer.declare(name, dtype, shape);
  for (const auto& [name, dtype, shape, bytes] : tensors) writer.write(name, bytes);
  writer.finish();
}

// Two shards and their index: 4 tensors, 28 bytes of data.
void write_sharded_checkpoint(const TempDir& dir) {
  write_shard(dir.file("model-00001-of-00002.safetensors"),
              {{"model.layers.0.w", TensorDtype::bf16, {2, 2}, {0x80, 0x3F, 0x00, 0xC0, 0xC0, 0x3F, 0x00, 0x00}},
               {"model.embed", TensorDtype::f32, {3}, bytes_of(std::vector<float>{1.0f, 2.0f, 3.0f})}});
  write_shard(dir.file("model-00002-of-00002.safetensors"),
              {{"lm_head.weight", TensorDtype::u8, {4}, {1, 2, 3, 4}},
               {"model.norm", TensorDtype::f16, {2}, {0x00, 0x3C, 0x00, 0xC0}}});
  write_safetensors_index(dir.file(kSafetensorsIndexFileName),
                          {{"model.layers.0.w", "model-00001-of-00002.safetensors"},
                           {"model.embed", "model-00001-of-00002.safetensors"},
                           {"lm_head.weight", "model-00002-of-00002.safetensors"},
                           {"model.norm", "model-00002-of-00002.safetensors"}},
                          28);
}

TEST(SafetensorsCheckpoint, OpensShardsThroughTheIndex) {
  TempDir dir;
  write_sharded_checkpoint(dir);
  const nlohmann::json index = nlohmann::json::parse(read_bytes(dir.file(kSafetensorsIndexFileName)));
  EXPECT_EQ(index, nlohmann::json::parse(R"({"metadata": {"total_size": 28}, "weight_map": {
      "lm_head.weight": "model-00002-of-00002.safetensors", "model.embed": "model-00001-of-00002.safetensors",
      "model.layers.0.w": "model-00001-of-00002.safetensors", "model.norm": "model-00002-of-00002.safetensors"}})"));

  const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
  std::vector<std::string> names;
  for (const TensorInfo& t : checkpoint.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"lm_head.weight", "model.embed", "model.layers.0.w", "model.norm"}));
  const std::span<const uint8_t> head = checkpoint.bytes("lm_head.weight");
  EXPECT_EQ(std::vector<uint8_t>(head.begin(), head.end()), (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_EQ(checkpoint.to_float("model.layers.0.w"), (std::vector<float>{1.0f, -2.0f, 1.5f, 0.0f}));
  EXPECT_EQ(checkpoint.to_float("model.embed"), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(checkpoint.to_float("model.norm"), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(checkpoint.find("nope"), nullptr);
  test::expect_input_error([&] { checkpoint.bytes("nope"); }, {dir.path().string(), "'nope'"});
}

TEST(SafetensorsCheckpoint, OpensASingleFileOrADirectoryWithModelSafetensors) {
  TempDir dir;
  write_shard(dir.file("model.safetensors"), {{"x", TensorDtype::i8, {2}, {0xFE, 0x05}}});
  for (const std::string& source : {dir.path().string(), dir.file("model.safetensors")}) {
    const Checkpoint checkpoint = Checkpoint::open(source);
    ASSERT_EQ(checkpoint.tensors().size(), 1u) << source;
    EXPECT_EQ(checkpoint.to_float("x"), (std::vector<float>{-2.0f, 5.0f})) << source;
  }
  TempDir empty;
  test::expect_input_error([&] { Checkpoint::open(empty.path().string()); },
                           {empty.path().string(), kSafetensorsIndexFileName, kSingleSafetensorsFileName});
  test::expect_input_error([&] { Checkpoint::open(empty.file("absent.safetensors")); },
                           {"absent.safetensors", "no such file"});
}

TEST(SafetensorsCheckpoint, ToFloatDecodesEveryFloatDtype) {
  TempDir dir;
  auto le16 = [](std::initializer_list<uint16_t> values) { return bytes_of(std::vector<uint16_t>(values)); };
  write_shard(dir.file("model.safetensors"),
              {{"bf16", TensorDtype::bf16, {4}, le16({0x3F80, 0xC000, 0x3FC0, 0x7F80})},
               {"f16", TensorDtype::f16, {7}, le16({0x3C00, 0xC000, 0x0001, 0x7C00, 0x3555, 0x7BFF, 0x0400})},
               {"f32", TensorDtype::f32, {2}, bytes_of(std::vector<float>{0.1f, -3.5f})},
               {"f8", TensorDtype::f8_e4m3, {4}, {0x38, 0x7E, 0x01, 0xB8}},
               {"i8", TensorDtype::i8, {3}, {0x80, 0x7F, 0xFF}},
               {"u8", TensorDtype::u8, {2}, {0xFF, 0x00}},
               {"i32", TensorDtype::i32, {1}, {1, 0, 0, 0}}});
  const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
  EXPECT_EQ(checkpoint.to_float("bf16"), (std::vector<float>{1.0f, -2.0f, 1.5f, INFINITY}));
  EXPECT_EQ(checkpoint.to_float("f16"), (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), INFINITY,
                                                            0.333251953125f, 65504.0f, std::ldexp(1.0f, -14)}));
  EXPECT_EQ(checkpoint.to_float("f32"), (std::vector<float>{0.1f, -3.5f}));
  EXPECT_EQ(checkpoint.to_float("f8"), (std::vector<float>{1.0f, 448.0f, std::ldexp(1.0f, -9), -1.0f}));
  EXPECT_EQ(checkpoint.to_float("i8"), (std::vector<float>{-128.0f, 127.0f, -1.0f}));
  EXPECT_EQ(checkpoint.to_float("u8"), (std::vector<float>{255.0f, 0.0f}));
  test::expect_input_error([&] { checkpoint.to_float("i32"); }, {"model.safetensors", "'i32'", "I32"});
}

TEST(SafetensorsCheckpoint, IndexAndShardsMustAgree) {
  const std::string index_name = kSafetensorsIndexFileName;
  {  // the index names a shard that is not there
    TempDir dir;
    write_sharded_checkpoint(dir);
    fs::remove(dir.file("model-00002-of-00002.safetensors"));
    test::expect_input_error(
        [&] { Checkpoint::open(dir.path().string()); },
        {index_name, "weight_map.lm_head.weight", "model-00002-of-00002.safetensors", "does not exist"});
  }
  {  // the index lists a tensor its shard lacks
    TempDir dir;
    write_sharded_checkpoint(dir);
    write_safetensors_index(dir.file(index_name),
                            {{"model.layers.0.w", "model-00001-of-00002.safetensors"},
                             {"model.embed", "model-00001-of-00002.safetensors"},
                             {"model.ghost", "model-00001-of-00002.safetensors"},
                             {"lm_head.weight", "model-00002-of-00002.safetensors"},
                             {"model.norm", "model-00002-of-00002.safetensors"}},
                            28);
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); },
                             {index_name, "weight_map.model.ghost", "not in shard"});
  }
  {  // a shard holds a tensor the index does not list
    TempDir dir;
    write_sharded_checkpoint(dir);
    write_safetensors_index(dir.file(index_name),
                            {{"model.layers.0.w", "model-00001-of-00002.safetensors"},
                             {"model.embed", "model-00001-of-00002.safetensors"},
                             {"lm_head.weight", "model-00002-of-00002.safetensors"}},
                            28);
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); },
                             {index_name, "model-00002-of-00002.safetensors", "'model.norm'", "does not list"});
  }
  {  // the index puts a tensor in the wrong shard
    TempDir dir;
    write_sharded_checkpoint(dir);
    write_safetensors_index(dir.file(index_name),
                            {{"model.layers.0.w", "model-00001-of-00002.safetensors"},
                             {"model.embed", "model-00001-of-00002.safetensors"},
                             {"lm_head.weight", "model-00001-of-00002.safetensors"},
                             {"model.norm", "model-00002-of-00002.safetensors"}},
                            28);
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); },
                             {index_name, "weight_map.lm_head.weight", "not in shard"});
  }
  {  // shard paths stay inside the directory; weight_map is required
    TempDir dir;
    write_safetensors_index(dir.file(index_name), {{"x", "../outside.safetensors"}}, 0);
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); },
                             {index_name, "weight_map.x", "relative path inside"});
    // A shard name longer than the file system allows does not exist (it was a file-system error escaping the
    // loader; found by the safetensors_index fuzz target).
    write_safetensors_index(dir.file(index_name), {{"x", std::string(5000, 's') + ".safetensors"}}, 0);
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); }, {"weight_map.x", "does not exist"});
    write_bytes(dir.file(index_name), {'{', '}'});
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); }, {index_name, "weight_map"});
    write_bytes(dir.file(index_name), {'{', '"'});
    test::expect_input_error([&] { Checkpoint::open(dir.path().string()); }, {index_name, "JSON"});
  }
}

// A shard reached through a symbolic link that leaves the checkpoint directory is refused before its bytes are
// read: the error must not quote them (it used to print the linked file's first 8 bytes as a header length).
TEST(Checkpoint, ShardLinkedOutsideTheDirectoryIsRefused) {
  TempDir outside, dir;
  const std::string secret = "SECRET-BYTES-0123456789";
  write_bytes(outside.file("secret.txt"), std::vector<uint8_t>(secret.begin(), secret.end()));
  std::filesystem::create_symlink(outside.file("secret.txt"), dir.file("model-00001-of-00001.safetensors"));
  write_safetensors_index(dir.file(kSafetensorsIndexFileName), {{"x", "model-00001-of-00001.safetensors"}}, 0);
  try {
    Checkpoint::open(dir.path().string());
    ADD_FAILURE() << "expected k3::InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("outside the checkpoint directory"), std::string::npos) << message;
    EXPECT_EQ(message.find("SECRET"), std::string::npos) << message;
    uint64_t as_length = 0;  // the first 8 bytes as a header length
    for (int i = 0; i < 8; ++i) as_length |= uint64_t(uint8_t(secret[i])) << (8 * i);
    EXPECT_EQ(message.find(std::to_string(as_length)), std::string::npos) << message;
  }
  // The single-file form too; a link inside the directory is fine.
  std::filesystem::remove(dir.file(kSafetensorsIndexFileName));
  std::filesystem::rename(dir.file("model-00001-of-00001.safetensors"), dir.file(kSingleSafetensorsFileName));
  test::expect_input_error([&] { Checkpoint::open(dir.path().string()); }, {"outside the checkpoint directory"});
}

// 200,000 tensors in one header, names longer than a short string, through the checkpoint as inspect opens it: every
// step is linear or n log n (nlohmann's callback parser rescanned the open object at every closing brace, so this
// took minutes; a quadratic duplicate check or index would too). A duplicate as the last entry is still found.
TEST(SafetensorsHostile, ManyTensorsParseInLinearTime) {
  TempDir dir;
  constexpr int kTensors = 200'000;
  const auto name = [](int i) { return fmt::format("layers.{}.experts.{}.w", i / 1000, i % 1000); };
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i) {
    header += fmt::format("{}\"{}\": {{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [{}, {}]}}", i ? ", " : "",
                          name(i), i, i + 1);
  }
  write_bytes(dir.file("many.safetensors"), safetensors_bytes(header + "}", std::vector<uint8_t>(kTensors, 7)));
  const Checkpoint checkpoint = Checkpoint::open(dir.file("many.safetensors"));
  ASSERT_EQ(checkpoint.tensors().size(), static_cast<std::size_t>(kTensors));
  for (int i = 0; i < kTensors; i += 997) {
    const TensorInfo* t = checkpoint.find(name(i));
    ASSERT_NE(t, nullptr) << name(i);
    EXPECT_EQ(t->begin - checkpoint.find(name(0))->begin, static_cast<uint64_t>(i));
  }
  std::vector<std::string> names;
  for (const TensorInfo& t : checkpoint.tensors()) names.push_back(t.name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(checkpoint.bytes(name(kTensors - 1)).size(), 1u);

  header += fmt::format(", \"{}\": {{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [{}, {}]}}}}", name(0),
                        kTensors, kTensors + 1);
  write_bytes(dir.file("twice.safetensors"), safetensors_bytes(header, std::vector<uint8_t>(kTensors + 1, 7)));
  test::expect_input_error([&] { Checkpoint::open(dir.file("twice.safetensors")); },
                           {"twice.safetensors", "key 'layers.0.experts.0.w' appears twice"});
}

struct HostileCase {
  const char* label;
  std::vector<uint8_t> bytes;
  std::vector<std::string> fragments;  // besides the file name
};

std::vector<HostileCase> hostile_cases() {
  auto file = [](const std::string& header, size_t data_bytes) {
    return safetensors_bytes(header, std::vector<uint8_t>(data_bytes, 0));
  };
  auto with_length = [](uint64_t length, size_t total_bytes) {
    std::vector<uint8_t> bytes = le64(length);
    bytes.resize(total_bytes, '{');
    return bytes;
  };
  std::vector<HostileCase> cases{
      {"empty file", {}, {"header", "shorter than the 8-byte"}},
      {"truncated length", {0x10, 0, 0, 0, 0}, {"header", "5 bytes"}},
      {"header past the end", with_length(1000, 40), {"header", "1000", "past the end"}},
      {"header absurd", with_length(uint64_t{1} << 40, 40), {"header", "exceeds"}},
      {"header length all ones", with_length(~uint64_t{0}, 40), {"header", "exceeds"}},
      {"empty header", file("", 0), {"header", "malformed JSON"}},
      {"bad JSON", file(R"({"w": {"dtype": )", 0), {"header", "malformed JSON"}},
      {"invalid UTF-8", file("{\"w\xff\": 1}", 0), {"header", "malformed JSON"}},
      {"not an object", file("[1, 2, 3]", 0), {"header", "expected a JSON object"}},
      {"deep nesting", file("{\"a\": " + std::string(100000, '['), 0), {"header", "nested deeper"}},
      {"deep array at the top", file(std::string(100000, '['), 0), {"header", "expected a JSON object"}},
      {"entry not an object", file(R"({"w": 5})", 0), {"'w'", "expected an object"}},
      {"missing dtype", file(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4), {"'w'", "dtype"}},
      {"unknown dtype",
       file(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8),
       {"'w'", "unknown dtype 'F64'", "BF16"}},
      {"negative shape",
       file(R"({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16),
       {"'w'", "non-negative integers", "[-1,4]"}},
      {"fractional shape",
       file(R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", 8),
       {"'w'", "non-negative integers"}},
      {"shape not a list",
       file(R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16),
       {"'w'", "shape"}},
      {"shape overflows",
       file(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 16]}})", 16),
       {"'w'", "overflows"}},
      {"shape beyond int64",
       file(R"({"w": {"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 1]}})", 1),
       {"'w'", "non-negative integers"}},
      {"offsets past the end",
       file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
       {"'w'", "end 16", "beyond the data section (8 bytes)"}},
      {"offsets near 2^64",
       file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551614, 18446744073709551615]}})", 8),
       {"'w'", "beyond the data section"}},
      {"begin after end",
       file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8),
       {"'w'", "begin 8 is after end 4"}},
      {"three offsets",
       file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", 8),
       {"'w'", "data_offsets"}},
      {"negative offset",
       file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 8),
       {"'w'", "data_offsets"}},
      {"size mismatch",
       file(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}})", 16),
       {"'w'", "span 8 bytes", "needs 16 bytes"}},
      {"overlapping ranges",
       file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            12),
       {"'a'", "'b'", "overlap"}},
      {"range inside another",
       file(R"({"a": {"dtype": "U8", "shape": [12], "data_offsets": [0, 12]},)"
            R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},)"
            R"( "c": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]}})",
            12),
       {"'a'", "'b'", "overlap"}},
      {"duplicate tensor name",
       file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
            R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
            8),
       {"'w'", "appears twice"}},
      {"duplicate field",
       file(R"({"w": {"dtype": "F32", "dtype": "U8", "shape": [1], "data_offsets": [0, 4]}})", 4),
       {"'w'", "'dtype' appears twice"}},
      {"duplicate metadata key", file(R"({"__metadata__": {"a": "1", "a": "2"}})", 0), {"header", "'a' appears twice"}},
      {"metadata not strings", file(R"({"__metadata__": {"a": 1}})", 0), {"header", "__metadata__", "'a'"}},
      {"metadata not an object", file(R"({"__metadata__": [1]})", 0), {"header", "__metadata__"}},
  };
  return cases;
}

TEST(SafetensorsHostile, EveryMalformedFileIsAnInputErrorNamingFileAndTensorOrHeader) {
  TempDir dir;
  int number = 0;
  for (const HostileCase& c : hostile_cases()) {
    SCOPED_TRACE(c.label);
    const std::string name = fmt::format("hostile_{}.safetensors", number++);
    write_bytes(dir.file(name), c.bytes);
    std::vector<std::string> fragments = c.fragments;
    fragments.push_back(name);
    try {
      SafetensorsFile::open(dir.file(name));
      ADD_FAILURE() << "expected k3::InputError, nothing was thrown";
    } catch (const InputError& e) {
      const std::string message = e.what();
      for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << f << " in " << message;
    }
  }
}

TEST(SafetensorsHostile, NotARegularFileOrMissing) {
  TempDir dir;
  test::expect_input_error([&] { SafetensorsFile::open(dir.path().string()); },
                           {dir.path().string(), "not a regular file"});
  test::expect_input_error([&] { SafetensorsFile::open(dir.file("missing.safetensors")); },
                           {"missing.safetensors", "cannot open"});
}

// Every prefix of a valid file and every single-byte corruption of its header either opens (and then
// every tensor's bytes are readable) or throws InputError; the sanitizer build checks the reads.
TEST(SafetensorsHostile, TruncationsAndCorruptionsNeverCrash) {
  TempDir dir;
  const std::string valid_path = dir.file("valid.safetensors");
  {
    SafetensorsWriter writer(valid_path, {{"format", "pt"}});
    writer.declare("a", TensorDtype::f32, {2, 2});
    writer.declare("b", TensorDtype::u8, {0});
    writer.declare("c", TensorDtype::bf16, {3});
    writer.write("a", std::vector<uint8_t>(16, 0x11));
    writer.write("b", {});
    writer.write("c", std::vector<uint8_t>(6, 0x22));
    writer.finish();
  }
  const std::vector<uint8_t> valid = read_bytes(valid_path);
  const size_t header_end = 8 + (valid[0] | (size_t{valid[1]} << 8));
  const std::string path = dir.file("mutant.safetensors");
  int opened = 0, refused = 0;
  auto try_open = [&](const std::vector<uint8_t>& bytes) {
    write_bytes(path, bytes);
    try {
      const SafetensorsFile file = SafetensorsFile::open(path);
      uint64_t checksum = 0;
      for (const TensorInfo& t : file.tensors()) {
        for (const uint8_t b : file.bytes(t)) checksum += b;
      }
      EXPECT_LE(checksum, 255u * bytes.size());
      ++opened;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("mutant.safetensors"), std::string::npos) << e.what();
      ++refused;
    }
  };
  for (size_t length = 0; length < valid.size(); ++length) {
    try_open(std::vector<uint8_t>(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(length)));
  }
  for (size_t position = 0; position < header_end; ++position) {
    for (const uint8_t mask : {0x01, 0x08, 0x20, 0x80, 0xFF}) {
      std::vector<uint8_t> mutant = valid;
      mutant[position] ^= mask;
      try_open(mutant);
    }
  }
  EXPECT_GT(opened, 0);  // some corruptions are harmless (e.g. in metadata text)
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace k3::weights
