#include "engine/parallel/nccl_communicator.h"

#include "core/error.h"
#include "engine/runtime/cuda_check.h"

#include <fmt/format.h>

// Throws k3::Error naming the NCCL call, file:line and NCCL's message.
#define NCCL_CHECK(call)                                                                                               \
  do {                                                                                                                 \
    const ncclResult_t k3_nccl_status_ = (call);                                                                       \
    if (k3_nccl_status_ != ncclSuccess) {                                                                              \
      ::k3::detail::check_failed(                                                                                      \
          #call, __FILE__, __LINE__,                                                                                   \
          ::fmt::format("NCCL error {}: {}", static_cast<int>(k3_nccl_status_), ncclGetErrorString(k3_nccl_status_))); \
    }                                                                                                                  \
  } while (0)

namespace k3::parallel {

namespace {

ncclDataType_t nccl_type(weights::TensorDtype dtype) {
  switch (dtype) {
    case weights::TensorDtype::bf16: return ncclBfloat16;
    case weights::TensorDtype::f16: return ncclFloat16;
    case weights::TensorDtype::f32: return ncclFloat32;
    case weights::TensorDtype::u8: return ncclUint8;
    case weights::TensorDtype::i8: return ncclInt8;
    case weights::TensorDtype::i32: return ncclInt32;
    case weights::TensorDtype::f8_e4m3: break;
  }
  throw Error(fmt::format("NCCL sums no {} values", weights::to_string(dtype)));
}

}  // namespace

ncclUniqueId NcclCommunicator::unique_id() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

NcclCommunicator::NcclCommunicator(std::string group, int rank, int size, const ncclUniqueId& id)
    : Communicator(std::move(group), rank, size) {
  CUDA_CHECK(cudaMalloc(&counts_device_, 2 * sizeof(int64_t) * static_cast<size_t>(size)));
  try {
    NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
  } catch (...) {
    cudaFree(counts_device_);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  cudaFree(counts_device_);
  ncclCommDestroy(comm_);
}

void NcclCommunicator::run_all_reduce(void* data, int64_t count, weights::TensorDtype dtype, cudaStream_t stream) {
  NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm_, stream));
}

void NcclCommunicator::run_all_gather(const void* send, void* recv, int64_t bytes_per_rank, cudaStream_t stream) {
  NCCL_CHECK(ncclAllGather(send, recv, static_cast<size_t>(bytes_per_rank), ncclUint8, comm_, stream));
}

void NcclCommunicator::run_reduce_scatter(const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                                          cudaStream_t stream) {
  NCCL_CHECK(ncclReduceScatter(send, recv, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm_, stream));
}

void NcclCommunicator::run_all_to_all(const void* send, const std::vector<int64_t>& send_rows, void* recv,
                                      const std::vector<int64_t>& recv_rows, int64_t row_bytes, cudaStream_t stream) {
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  int64_t sent = 0, received = 0;
  NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < size(); ++p) {
    if (send_rows[p] > 0) {
      NCCL_CHECK(
          ncclSend(in + sent * row_bytes, static_cast<size_t>(send_rows[p] * row_bytes), ncclUint8, p, comm_, stream));
    }
    if (recv_rows[p] > 0) {
      NCCL_CHECK(ncclRecv(out + received * row_bytes, static_cast<size_t>(recv_rows[p] * row_bytes), ncclUint8, p,
                          comm_, stream));
    }
    sent += send_rows[p];
    received += recv_rows[p];
  }
  NCCL_CHECK(ncclGroupEnd());
}

std::vector<int64_t> NcclCommunicator::exchange_counts(const OpRef&, const std::vector<int64_t>& send_rows,
                                                       cudaStream_t stream) {
  const int n = size();
  int64_t* send_counts = counts_device_;
  int64_t* recv_counts = counts_device_ + n;
  CUDA_CHECK(cudaMemcpyAsync(send_counts, send_rows.data(), sizeof(int64_t) * static_cast<size_t>(n),
                             cudaMemcpyHostToDevice, stream));
  NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < n; ++p) {
    NCCL_CHECK(ncclSend(send_counts + p, 1, ncclInt64, p, comm_, stream));
    NCCL_CHECK(ncclRecv(recv_counts + p, 1, ncclInt64, p, comm_, stream));
  }
  NCCL_CHECK(ncclGroupEnd());
  std::vector<int64_t> recv_rows(static_cast<std::size_t>(n));
  CUDA_CHECK(cudaMemcpyAsync(recv_rows.data(), recv_counts, sizeof(int64_t) * static_cast<size_t>(n),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return recv_rows;
}

}  // namespace k3::parallel
