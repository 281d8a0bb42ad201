#include "engine/parallel/communicator.h"

#include "core/error.h"
#include "engine/runtime/op_range_listener.h"

#include <nvtx3/nvToolsExt.h>

#include <numeric>

namespace k3::parallel {

namespace {

// The op's NVTX range (and the engine's op-range listener, as engine/runtime's OpRange opens them).
class CollectiveRange {
 public:
  explicit CollectiveRange(const std::string& name) : listener_(runtime::op_range_listener()) {
    if (listener_) listener_->push(name);
    nvtxRangePushA(name.c_str());
  }
  ~CollectiveRange() {
    nvtxRangePop();
    if (listener_) listener_->pop();
  }
  CollectiveRange(const CollectiveRange&) = delete;
  CollectiveRange& operator=(const CollectiveRange&) = delete;

 private:
  runtime::OpRangeListener* listener_;
};

std::string collective_name(const OpRef& op) {
  K3_CHECK(op_info(op.id).kind == OpKind::collective, "{} is not a collective op", op.name());
  return op.name();
}

int64_t total(const std::vector<int64_t>& rows) { return std::accumulate(rows.begin(), rows.end(), int64_t{0}); }

}  // namespace

Communicator::Communicator(std::string group, int rank, int size) : group_(std::move(group)), rank_(rank), size_(size) {
  K3_CHECK(size >= 1 && rank >= 0 && rank < size, "communicator '{}': rank {} of {}", group_, rank, size);
}

void Communicator::record(const OpRef& op, CollectiveKind kind, int64_t bytes) {
  records_.push_back({op.name(), kind, bytes, group_, size_});
}

void Communicator::all_reduce(const OpRef& op, void* data, int64_t count, weights::TensorDtype dtype,
                              cudaStream_t stream) {
  const std::string name = collective_name(op);
  K3_CHECK(count >= 0, "{}: {} elements", name, count);
  {
    CollectiveRange range(name);
    run_all_reduce(data, count, dtype, stream);
  }
  record(op, CollectiveKind::all_reduce, count * weights::element_size_bytes(dtype));
}

void Communicator::all_gather(const OpRef& op, const void* send, void* recv, int64_t count, weights::TensorDtype dtype,
                              cudaStream_t stream) {
  const std::string name = collective_name(op);
  K3_CHECK(count >= 0, "{}: {} elements", name, count);
  const int64_t bytes = count * weights::element_size_bytes(dtype);
  {
    CollectiveRange range(name);
    run_all_gather(send, recv, bytes, stream);
  }
  record(op, CollectiveKind::all_gather, bytes * size_);
}

void Communicator::reduce_scatter(const OpRef& op, const void* send, void* recv, int64_t count,
                                  weights::TensorDtype dtype, cudaStream_t stream) {
  const std::string name = collective_name(op);
  K3_CHECK(count >= 0, "{}: {} elements", name, count);
  {
    CollectiveRange range(name);
    run_reduce_scatter(send, recv, count, dtype, stream);
  }
  record(op, CollectiveKind::reduce_scatter, count * size_ * weights::element_size_bytes(dtype));
}

void Communicator::all_to_all(const OpRef& op, const void* send, const std::vector<int64_t>& send_rows, void* recv,
                              const std::vector<int64_t>& recv_rows, int64_t row_bytes, cudaStream_t stream) {
  const std::string name = collective_name(op);
  K3_CHECK(static_cast<int>(send_rows.size()) == size_ && static_cast<int>(recv_rows.size()) == size_,
           "{}: {} send and {} receive counts for a group of {}", name, send_rows.size(), recv_rows.size(), size_);
  K3_CHECK(row_bytes > 0, "{}: rows of {} bytes", name, row_bytes);
  for (int p = 0; p < size_; ++p) {
    K3_CHECK(send_rows[p] >= 0 && recv_rows[p] >= 0, "{}: negative count for peer {}", name, p);
  }
  K3_CHECK(recv_rows[rank_] == send_rows[rank_], "{}: rank {} sends itself {} rows but expects {}", name, rank_,
           send_rows[rank_], recv_rows[rank_]);
  {
    CollectiveRange range(name);
    run_all_to_all(send, send_rows, recv, recv_rows, row_bytes, stream);
  }
  record(op, CollectiveKind::all_to_all, total(send_rows) * row_bytes);
}

std::vector<int64_t> Communicator::dispatch(const OpRef& op, const void* send, const std::vector<int64_t>& send_rows,
                                            void* recv, int64_t recv_capacity_rows, int64_t row_bytes,
                                            cudaStream_t stream) {
  const std::string name = collective_name(op);
  K3_CHECK(static_cast<int>(send_rows.size()) == size_, "{}: {} send counts for a group of {}", name, send_rows.size(),
           size_);
  K3_CHECK(row_bytes > 0, "{}: rows of {} bytes", name, row_bytes);
  for (int p = 0; p < size_; ++p) K3_CHECK(send_rows[p] >= 0, "{}: negative count for peer {}", name, p);
  std::vector<int64_t> recv_rows;
  {
    CollectiveRange range(name);
    recv_rows = exchange_counts(op, send_rows, stream);
    K3_CHECK(static_cast<int>(recv_rows.size()) == size_ && recv_rows[rank_] == send_rows[rank_],
             "{}: the count exchange gave {} counts, {} from this rank for the {} it sent itself", name,
             recv_rows.size(), recv_rows.empty() ? 0 : recv_rows[rank_], send_rows[rank_]);
    K3_CHECK(total(recv_rows) <= recv_capacity_rows, "{}: {} rows arrive, the receive buffer holds {}", name,
             total(recv_rows), recv_capacity_rows);
    run_all_to_all(send, send_rows, recv, recv_rows, row_bytes, stream);
  }
  record(op, CollectiveKind::all_to_all, total(send_rows) * row_bytes);
  return recv_rows;
}

}  // namespace k3::parallel
