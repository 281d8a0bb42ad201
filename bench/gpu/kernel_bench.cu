// kernel_bench: perf mode of the GPU op harness (tests/kernels/op_cases/op_case.h). Every case of the table with perf
// shapes is timed at them, per perf variant, against the speed of light on the GPU it runs on (method and JSON
// output: bench/gpu/bench_harness.h): bandwidth-sized launches alone on inputs rotated over more than L2; a decode
// step's small ops both as one launch and per launch of 32 replayed from one CUDA graph; the KDA decode step also per
// layer of a graph holding one step per layer. A summary (achieved bandwidth, FLOP rate, % of roofline) goes to
// standard error, the JSON to standard output.
//
// Usage: kernel_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N] [--filter TEXT[|TEXT…]]
//        kernel_bench --list   (the rows' names, one a line, without a GPU)
#include "bench/gpu/bench_harness.h"
#include "tests/kernels/op_cases/op_case.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using k3::bench::Result;
using k3::gpu_test::Cost;
using k3::gpu_test::Launch;
using k3::gpu_test::OpCase;
using k3::gpu_test::Timing;

namespace {

constexpr int kGraphLaunches = 32;

// The rows of one case at one shape and variant, timed as its cost says.
void time_row(const k3::bench::Session& session, const OpCase& c, const k3::gpu_test::Shape& shape,
              const k3::gpu_test::Variant& variant, std::vector<Result>& results) {
  const std::string name = c.perf_name(shape, variant);
  if (!session.wants(name)) return;
  const Cost cost = c.cost(shape);
  const int sets = cost.timing == Timing::layer_graph ? cost.layers
                   : cost.rotated_bytes > 0           ? session.rotation_for(cost.rotated_bytes)
                                                      : 1;
  const Launch launch = c.perf(shape, variant, sets);
  Result r{name, cost.bytes, cost.flops};
  r.cls = cost.cls;
  r.roofline_us = session.roofline_us(cost.flops, cost.bytes, cost.cls, cost.compute);
  int next = 0;  // consecutive launches take consecutive sets, inside a graph too
  const auto launch_next = [&](cudaStream_t stream) { launch(next++ % sets, stream); };
  switch (cost.timing) {
    case Timing::alone:
      r.median_us = k3::bench::time_us([&](int) { launch_next(nullptr); }, session.repeats);
      results.push_back(r);
      break;
    case Timing::latency: {
      Result graph = r;
      r.name = name + " (one launch)";
      r.median_us = k3::bench::time_us([&](int) { launch_next(nullptr); }, session.repeats);
      graph.name = fmt::format("{} (per launch, {} in a CUDA graph)", name, kGraphLaunches);
      graph.median_us = k3::bench::graph_us_per_launch(launch_next, kGraphLaunches, session.repeats);
      results.push_back(r);
      results.push_back(graph);
      break;
    }
    case Timing::layer_graph:
      next = 0;
      r.median_us = k3::bench::graph_us_per_launch(launch_next, sets, session.repeats);
      results.push_back(r);
      break;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

void print_summary(const k3::bench::Session& session, const std::vector<Result>& results) {
  fmt::print(stderr, "{:>10} {:>11} {:>12} {:>9}  {}\n", "median_us", "GB/s", "GFLOP/s", "% roofl.", "op");
  for (const Result& r : results) {
    const double s = r.median_us * 1e-6;
    const std::string percent = r.roofline_us > 0 ? fmt::format("{:.1f}", 100.0 * r.roofline_us / r.median_us) : "-";
    fmt::print(stderr, "{:>10.3f} {:>11.1f} {:>12.1f} {:>9}  {}\n", r.median_us, r.bytes / s * 1e-9, r.flops / s * 1e-9,
               percent, r.name);
  }
  fmt::print(stderr, "measured copy bandwidth {:.1f} GB/s on {}\n", session.copy_bytes_per_s * 1e-9, session.prop.name);
}

}  // namespace

// The name of every row the table times (a latency row's two timings under its one name).
int list_rows() {
  for (const OpCase& c : k3::gpu_test::op_cases()) {
    for (const auto& shape : c.perf_shapes) {
      for (const auto& variant : c.perf_variants) fmt::print("{}\n", c.perf_name(shape, variant));
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) return list_rows();
  const k3::bench::Session session(argc, argv);
  std::vector<Result> results;
  for (const OpCase& c : k3::gpu_test::op_cases()) {
    for (const auto& shape : c.perf_shapes) {
      for (const auto& variant : c.perf_variants) time_row(session, c, shape, variant, results);
    }
  }
  print_summary(session, results);
  session.print(results);
  return 0;
}
