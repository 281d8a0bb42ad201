// The communicators on one GPU: the same collectives against the EmulatedCommunicator and an NcclCommunicator with
// a world of one (which runs every NCCL call), each result equal to a CPU computation of what the group gives, and
// the record listing every call with its name, kind, bytes and group. Then the emulation of rank 2 of an EP group of
// 4: the shapes and contents it leaves where a collective's output feeds compute.
#include "engine/parallel/emulated_communicator.h"
#include "kernels/gpu_harness.h"
#ifdef K3PERF_HAVE_NCCL
#include "engine/parallel/nccl_communicator.h"
#endif

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>
#include <random>

namespace k3::parallel {
namespace {

using gpu_test::DeviceBuffer;
using weights::TensorDtype;

constexpr UniformRouting kRouting{64, 4, 7};  // 64 experts, top 4

// What the group computes, on the CPU: the sum of every rank's contribution (all-reduce), the concatenation
// (all-gather), rank r's part of the sum (reduce-scatter).
std::vector<float> cpu_sum(const std::vector<std::vector<float>>& contributions) {
  std::vector<float> out(contributions.at(0).size(), 0.0f);
  for (const auto& c : contributions) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += c[i];
  }
  return out;
}
template <typename T>
std::vector<T> cpu_concat(const std::vector<std::vector<T>>& parts) {
  std::vector<T> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

template <typename T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (T& x : v) x = d(rng);
  } else {
    for (T& x : v) x = static_cast<T>(rng());
  }
  return v;
}

struct Kind {
  std::string name;
  std::function<std::unique_ptr<Communicator>()> make;
};

std::vector<Kind> world_of_one_kinds() {
  std::vector<Kind> kinds{{"emulated", [] { return std::make_unique<EmulatedCommunicator>("tp", 0, 1, kRouting); }}};
#ifdef K3PERF_HAVE_NCCL
  kinds.push_back(
      {"nccl", [] { return std::make_unique<NcclCommunicator>("tp", 0, 1, NcclCommunicator::unique_id()); }});
#endif
  return kinds;
}

class WorldOfOne : public ::testing::TestWithParam<Kind> {};

TEST_P(WorldOfOne, EveryCollectiveGivesTheGroupsResultAndIsRecorded) {
  K3_REQUIRE_GPU();
  std::unique_ptr<Communicator> comm = GetParam().make();
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));

  // All-reduce, fp32 and bf16 (compared bit for bit: a sum over one rank is exact).
  const std::vector<float> partial = random_values<float>(1000, 1);
  DeviceBuffer<float> ar(partial);
  comm->all_reduce({3, OpId::attn_all_reduce}, ar.get(), 1000, TensorDtype::f32, stream);
  std::vector<uint16_t> finite_bf16 = random_values<uint16_t>(64, 2);
  for (uint16_t& x : finite_bf16) x &= 0xBFFF;  // clear the top exponent bit: no NaN or inf
  DeviceBuffer<uint16_t> ar16(finite_bf16);
  comm->all_reduce({0, OpId::mlp_all_reduce}, ar16.get(), 64, TensorDtype::bf16, stream);

  // All-gather of logits-like bf16 rows, and reduce-scatter of fp32 partial sums.
  const std::vector<uint16_t> local = random_values<uint16_t>(557, 3);
  DeviceBuffer<uint16_t> ag_send(local), ag_recv(557);
  comm->all_gather({-1, OpId::head_all_gather}, ag_send.get(), ag_recv.get(), 557, TensorDtype::bf16, stream);
  const std::vector<float> rs_in = random_values<float>(300, 4);
  DeviceBuffer<float> rs_send(rs_in), rs_recv(300);
  comm->reduce_scatter({5, OpId::attn_reduce_scatter}, rs_send.get(), rs_recv.get(), 300, TensorDtype::f32, stream);

  // Dispatch of 37 routed rows of a K3 latent (3584 bf16 values), and their combine back.
  const int64_t row_bytes = 3584 * 2, rows = 37;
  const std::vector<uint8_t> routed = random_values<uint8_t>(rows * row_bytes, 5);
  DeviceBuffer<uint8_t> d_send(routed), d_recv(rows * row_bytes), c_recv(rows * row_bytes);
  const std::vector<int64_t> got =
      comm->dispatch({16, OpId::moe_dispatch}, d_send.get(), {rows}, d_recv.get(), rows, row_bytes, stream);
  comm->all_to_all({16, OpId::moe_combine}, d_recv.get(), got, c_recv.get(), {rows}, row_bytes, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaStreamDestroy(stream));

  EXPECT_EQ(ar.download(), cpu_sum({partial}));
  EXPECT_EQ(ar16.download(), finite_bf16);
  EXPECT_EQ(ag_recv.download(), cpu_concat<uint16_t>({local}));
  EXPECT_EQ(rs_recv.download(), cpu_sum({rs_in}));
  EXPECT_EQ(got, (std::vector<int64_t>{rows}));
  EXPECT_EQ(d_recv.download(), routed);
  EXPECT_EQ(c_recv.download(), routed);

  struct Want {
    const char* name;
    CollectiveKind kind;
    int64_t bytes;
  };
  const std::vector<Want> want{{"L004.attn.all_reduce", CollectiveKind::all_reduce, 4000},
                               {"L001.mlp.all_reduce", CollectiveKind::all_reduce, 128},
                               {"head.all_gather", CollectiveKind::all_gather, 1114},
                               {"L006.attn.reduce_scatter", CollectiveKind::reduce_scatter, 1200},
                               {"L017.moe.dispatch", CollectiveKind::all_to_all, rows * row_bytes},
                               {"L017.moe.combine", CollectiveKind::all_to_all, rows * row_bytes}};
  ASSERT_EQ(comm->records().size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const CollectiveRecord& r = comm->records()[i];
    EXPECT_EQ(r.name, want[i].name);
    EXPECT_EQ(r.kind, want[i].kind) << r.name;
    EXPECT_EQ(r.bytes, want[i].bytes) << r.name;
    EXPECT_EQ(r.group, "tp");
    EXPECT_EQ(r.group_size, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Communicators, WorldOfOne, ::testing::ValuesIn(world_of_one_kinds()),
                         [](const ::testing::TestParamInfo<Kind>& info) { return info.param.name; });

// Rank 2 of an EP group of 4 on one GPU.
TEST(EmulatedCommunicator, RankTwoOfFourGetsDataOfTheRightShape) {
  K3_REQUIRE_GPU();
  EmulatedCommunicator comm("ep", 2, 4, kRouting);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));

  const std::vector<float> partial = random_values<float>(256, 11);
  DeviceBuffer<float> ar(partial);
  comm.all_reduce({7, OpId::moe_expert_all_reduce}, ar.get(), 256, TensorDtype::f32, stream);
  DeviceBuffer<float> ag_send(partial), ag_recv(4 * 256);
  comm.all_gather({7, OpId::mlp_sequence_all_gather}, ag_send.get(), ag_recv.get(), 256, TensorDtype::f32, stream);
  const std::vector<float> contribution = random_values<float>(4 * 64, 12);
  DeviceBuffer<float> rs_send(contribution), rs_recv(64);
  comm.reduce_scatter({7, OpId::mlp_reduce_scatter}, rs_send.get(), rs_recv.get(), 64, TensorDtype::f32, stream);

  // 10 tokens routed to 4 experts each: 40 rows, 12 of them to this rank's own experts.
  const int64_t row_bytes = 16;
  const std::vector<int64_t> send_rows{9, 11, 12, 8};
  const std::vector<uint8_t> routed = random_values<uint8_t>(40 * row_bytes, 13);
  const int64_t capacity = 80;
  DeviceBuffer<uint8_t> d_send(routed), d_recv(capacity * row_bytes);
  const std::vector<int64_t> got =
      comm.dispatch({7, OpId::moe_dispatch}, d_send.get(), send_rows, d_recv.get(), capacity, row_bytes, stream);
  const int64_t received = std::accumulate(got.begin(), got.end(), int64_t{0});
  DeviceBuffer<uint8_t> c_recv(40 * row_bytes);
  comm.all_to_all({7, OpId::moe_combine}, d_recv.get(), got, c_recv.get(), send_rows, row_bytes, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaStreamDestroy(stream));

  EXPECT_EQ(ar.download(), partial);  // the local partial sum
  EXPECT_EQ(ag_recv.download(), cpu_concat<float>({partial, partial, partial, partial}));
  const std::vector<float> mine(contribution.begin() + 2 * 64, contribution.begin() + 3 * 64);
  EXPECT_EQ(rs_recv.download(), mine);

  // The counts: the peers' from the seeded uniform router (10 tokens each), this rank's own 12.
  std::vector<int64_t> want_rows = uniform_rows_to(kRouting, 4, 2, 7, 10);
  want_rows[2] = 12;
  EXPECT_EQ(got, want_rows);
  // The rows: from itself its own 12 (rows 20..31 of what it sent); from each peer its sent rows, repeated.
  const std::vector<uint8_t> recv = d_recv.download();
  int64_t at = 0;
  for (int p = 0; p < 4; ++p) {
    for (int64_t i = 0; i < got[p]; ++i) {
      const int64_t source = p == 2 ? 20 + i : i % 40;
      ASSERT_TRUE(std::equal(routed.begin() + source * row_bytes, routed.begin() + (source + 1) * row_bytes,
                             recv.begin() + (at + i) * row_bytes))
          << "row " << i << " from peer " << p;
    }
    at += got[p];
  }
  // The combine returns this rank's own rows to where it sent them from.
  const std::vector<uint8_t> back = c_recv.download();
  const int64_t self_at = got[0] + got[1];
  EXPECT_TRUE(
      std::equal(back.begin() + 20 * row_bytes, back.begin() + 32 * row_bytes, recv.begin() + self_at * row_bytes));

  ASSERT_EQ(comm.records().size(), 5u);
  EXPECT_EQ(comm.records()[1].bytes, 4 * 256 * 4);  // the gathered output
  EXPECT_EQ(comm.records()[2].bytes, 4 * 64 * 4);   // the reduce-scatter's input
  EXPECT_EQ(comm.records()[3].bytes, 40 * row_bytes);
  EXPECT_EQ(comm.records()[4].bytes, received * row_bytes);
  for (const CollectiveRecord& r : comm.records()) EXPECT_EQ(r.group_size, 4) << r.name;
}

TEST(EmulatedCommunicator, RejectsAnOpThatIsNoCollective) {
  EmulatedCommunicator comm("tp", 0, 2);
  EXPECT_THROW(comm.all_reduce({3, OpId::mla_o_proj}, nullptr, 0, TensorDtype::bf16, nullptr), Error);
  EXPECT_TRUE(comm.records().empty());
}

}  // namespace
}  // namespace k3::parallel
