// The collectives of one GPU's group (its attention group, its EP group, ...; engine/parallel/layout.h), on the op
// graph's positions and with its names: each call names its op (an OpRef of core/op_names.h whose kind is
// collective, e.g. {16, OpId::moe_dispatch} = "L017.moe.dispatch"), runs inside an NVTX range of that name (and the
// engine's op-range listener, engine/runtime/op_range_listener.h), and is recorded with its kind, bytes and group.
// Bytes are nccl-tests sizes, as the op graph counts them: an all-reduce's buffer, an all-gather's gathered output,
// a reduce-scatter's input, what an all-to-all sends from this rank.
//
// Implementations: NcclCommunicator (nccl_communicator.h) runs the collective; EmulatedCommunicator
// (emulated_communicator.h) runs one rank of a larger deployment on one GPU, recording each collective without
// executing it and leaving data of the right shape where its output feeds compute.
//
// Contract: buffers are device memory, work is ordered on `stream`; dispatch() waits for its stream (it returns the
// receive counts to the host). Argument errors (a non-collective op, counts of the wrong size) throw k3::Error.
#pragma once

#include "core/op_graph.h"
#include "core/op_names.h"
#include "engine/parallel/collective_record.h"
#include "engine/weights/tensor_dtype.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace k3::parallel {

class Communicator {
 public:
  Communicator(std::string group, int rank, int size);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& group() const { return group_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The sum over the group of `count` elements, in place.
  void all_reduce(const OpRef& op, void* data, int64_t count, weights::TensorDtype dtype, cudaStream_t stream);
  // Every rank's `count` elements, into `recv` [size * count], rank r's at r * count (in place when `send` is there).
  void all_gather(const OpRef& op, const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                  cudaStream_t stream);
  // The sum over the group of `send` [size * count]; rank r keeps part r, `count` elements, in `recv`.
  void reduce_scatter(const OpRef& op, const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                      cudaStream_t stream);
  // Rows of `row_bytes` to and from every peer: `send_rows[p]` consecutive rows of `send` go to peer p and
  // `recv_rows[p]` rows arrive from it, both in peer order (the combine of routed tokens, or any exchange whose
  // counts both sides know). recv_rows[rank] must equal send_rows[rank].
  void all_to_all(const OpRef& op, const void* send, const std::vector<int64_t>& send_rows, void* recv,
                  const std::vector<int64_t>& recv_rows, int64_t row_bytes, cudaStream_t stream);
  // Routed tokens to their experts' ranks: sends as all_to_all does and returns the rows received from each peer
  // (stored in peer order in `recv`, which has room for `recv_capacity_rows`). Exchanges the counts first.
  std::vector<int64_t> dispatch(const OpRef& op, const void* send, const std::vector<int64_t>& send_rows, void* recv,
                                int64_t recv_capacity_rows, int64_t row_bytes, cudaStream_t stream);

  const std::vector<CollectiveRecord>& records() const { return records_; }
  void clear_records() { records_.clear(); }

 protected:
  virtual void run_all_reduce(void* data, int64_t count, weights::TensorDtype dtype, cudaStream_t stream) = 0;
  virtual void run_all_gather(const void* send, void* recv, int64_t bytes_per_rank, cudaStream_t stream) = 0;
  virtual void run_reduce_scatter(const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                                  cudaStream_t stream) = 0;
  virtual void run_all_to_all(const void* send, const std::vector<int64_t>& send_rows, void* recv,
                              const std::vector<int64_t>& recv_rows, int64_t row_bytes, cudaStream_t stream) = 0;
  // The rows each peer will send this rank in the dispatch of `op`.
  virtual std::vector<int64_t> exchange_counts(const OpRef& op, const std::vector<int64_t>& send_rows,
                                               cudaStream_t stream) = 0;

 private:
  void record(const OpRef& op, CollectiveKind kind, int64_t bytes);

  std::string group_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<CollectiveRecord> records_;
};

}  // namespace k3::parallel
