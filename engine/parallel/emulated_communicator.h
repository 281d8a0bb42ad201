// One rank of a larger deployment on one GPU: every collective is recorded (name, kind, bytes, group) as rank
// `rank` of `size` would issue it, with its payload prepared by the caller exactly as that rank would send it, but
// nothing leaves the GPU. Where the output feeds compute it holds data of the right shape:
//   all_reduce      the rank's own contribution (its partial sum), unchanged;
//   all_gather      the local part in every slot;
//   reduce_scatter  the rank's own part of its contribution;
//   all_to_all      from itself, the rows it sent itself; from each peer, its own sent rows, repeated to the count;
//   dispatch        the counts a seeded uniform router gives (uniform_routing.h: peers route as many tokens as this
//                   rank, top_k experts each), the rows filled as all_to_all fills them.
#pragma once

#include "engine/parallel/communicator.h"
#include "engine/parallel/uniform_routing.h"

namespace k3::parallel {

class EmulatedCommunicator : public Communicator {
 public:
  // `routing` is needed for dispatch only (an EP group); its experts must divide by `size`.
  EmulatedCommunicator(std::string group, int rank, int size, UniformRouting routing = {});

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
  UniformRouting routing_;
};

}  // namespace k3::parallel
