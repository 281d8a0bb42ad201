#include "engine/parallel/emulated_communicator.h"

#include "core/error.h"
#include "engine/runtime/cuda_check.h"

#include <algorithm>
#include <numeric>

namespace k3::parallel {

namespace {

void copy(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (bytes > 0 && dst != src) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
  }
}

}  // namespace

EmulatedCommunicator::EmulatedCommunicator(std::string group, int rank, int size, UniformRouting routing)
    : Communicator(std::move(group), rank, size), routing_(routing) {}

void EmulatedCommunicator::run_all_reduce(void*, int64_t, weights::TensorDtype, cudaStream_t) {}

void EmulatedCommunicator::run_all_gather(const void* send, void* recv, int64_t bytes_per_rank, cudaStream_t stream) {
  auto* out = static_cast<char*>(recv);
  for (int r = 0; r < size(); ++r) copy(out + r * bytes_per_rank, send, bytes_per_rank, stream);
}

void EmulatedCommunicator::run_reduce_scatter(const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                                              cudaStream_t stream) {
  const int64_t bytes = count * weights::element_size_bytes(dtype);
  copy(recv, static_cast<const char*>(send) + rank() * bytes, bytes, stream);
}

void EmulatedCommunicator::run_all_to_all(const void* send, const std::vector<int64_t>& send_rows, void* recv,
                                          const std::vector<int64_t>& recv_rows, int64_t row_bytes,
                                          cudaStream_t stream) {
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  const int64_t sent = std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0});
  const int64_t self_offset = std::accumulate(send_rows.begin(), send_rows.begin() + rank(), int64_t{0});
  int64_t at = 0;  // rows written
  for (int p = 0; p < size(); ++p) {
    const int64_t rows = recv_rows[p];
    if (p == rank()) {
      copy(out + at * row_bytes, in + self_offset * row_bytes, rows * row_bytes, stream);
    } else if (sent == 0) {
      if (rows > 0) CUDA_CHECK(cudaMemsetAsync(out + at * row_bytes, 0, static_cast<size_t>(rows * row_bytes), stream));
    } else {
      for (int64_t done = 0; done < rows;) {  // this rank's sent rows, repeated
        const int64_t n = std::min(sent, rows - done);
        copy(out + (at + done) * row_bytes, in, n * row_bytes, stream);
        done += n;
      }
    }
    at += rows;
  }
}

std::vector<int64_t> EmulatedCommunicator::exchange_counts(const OpRef& op, const std::vector<int64_t>& send_rows,
                                                           cudaStream_t) {
  const int64_t assignments = std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0});
  if (routing_.top_k < 1) {
    throw Error(fmt::format("{}: emulated dispatch in group '{}' needs the experts and top_k of its router", op.name(),
                            group()));
  }
  const int64_t tokens = (assignments + routing_.top_k - 1) / routing_.top_k;
  std::vector<int64_t> rows = uniform_rows_to(routing_, size(), rank(), op.layer, tokens);
  rows[rank()] = send_rows[rank()];
  return rows;
}

}  // namespace k3::parallel
