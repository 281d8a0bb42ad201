// The collectives run by NCCL: ncclAllReduce, ncclAllGather, ncclReduceScatter, and grouped ncclSend / ncclRecv for
// the all-to-all of routed tokens (their counts exchanged the same way first). One communicator per group; every
// rank of the group constructs its own with the group's ncclUniqueId (from unique_id() on one rank, shared by the
// launcher). A world of one runs every call on one GPU.
#pragma once

#include "engine/parallel/communicator.h"

#include <nccl.h>

namespace k3::parallel {

class NcclCommunicator : public Communicator {
 public:
  static ncclUniqueId unique_id();
  // ncclCommInitRank(size, id, rank) on the current device.
  NcclCommunicator(std::string group, int rank, int size, const ncclUniqueId& id);
  ~NcclCommunicator() override;

 protected:
  void run_all_reduce(void* data, int64_t count, weights::TensorDtype dtype, cudaStream_t stream) override;
  void run_all_gather(const void* send, void* recv, int64_t bytes_per_rank, cudaStream_t stream) override;
  void run_reduce_scatter(const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                          cudaStream_t stream) override;
  void run_all_to_all(const void* send, const std::vector<int64_t>& send_rows, void* recv,
                      const std::vector<int64_t>& recv_rows, int64_t row_bytes, cudaStream_t stream) override;
  std::vector<int64_t> exchange_counts(const OpRef& op, const std::vector<int64_t>& send_rows,
                                       cudaStream_t stream) override;

 private:
  ncclComm_t comm_ = nullptr;
  int64_t* counts_device_ = nullptr;  // [2 * size]: the counts sent, then those received
};

}  // namespace k3::parallel
