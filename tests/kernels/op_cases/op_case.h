// The GPU op harness (in the shape of ggml's test-backend-ops): one table of OpCases, each an op of kernels/ with
// its odd test shapes, the variants of its …Algorithm enum, a CPU reference (engine/reference) and the GPU call.
// Two drivers read the table:
//   test mode — gpu_tests (tests/kernels/op_cases_gpu_test.cpp) registers one GoogleTest test per case × shape ×
//               variant, named GpuOp_<case>.<shape>/<variant>; the CPU reference runs everywhere, the GPU side
//               skips without a CUDA device. Rules: fresh random inputs (never zeros), outputs poisoned with NaN
//               before the kernel runs (DeviceBuffer), normalised error against a dtype-scaled tolerance.
//   perf mode — kernel_bench (bench/gpu/kernel_bench.cu) times each case at its perf shapes (warm-up, inputs
//               rotated over more than L2, median of CUDA-event timings; bench/gpu/bench_harness.h) and prints
//               achieved bytes/s and FLOP/s against the roofline sim/ predicts.
//
// Quick start: adding a case
//   1. In tests/kernels/op_cases/<family>_cases.cpp write a function returning an OpCase (or several):
//        OpCase c{"rmsnorm_bf16", OpKind::rmsnorm};
//        c.shapes = {shape({{"rows", 3}, {"width", 4093}, {"pad", 5}}), ...};   // odd sizes, strided rows
//        c.variants = {variant(MyAlgorithm::automatic, "automatic"), ...};    // every value of the enum
//        c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
//          ... random inputs, the reference from engine/reference (cpu.expect(finite, "reference")) ...
//          return [=](const Variant& v, Checks& gpu) {   // runs only where a CUDA device is present
//            ... DeviceBuffers, the kernel with algorithm_of<MyAlgorithm>(v), download ...
//            gpu.near("y", normalized_error(got, expected), tolerance_for<__nv_bfloat16>());
//          };
//        };
//      The shape's dimensions name the test (rows3_width4093_pad5); a variant a kernel refuses for a shape is
//      checked in the GPU call (gpu.equal("refused", status, cudaErrorInvalidValue)).
//   2. For perf mode, add c.perf_shapes (the op's real sizes), c.perf_variants (empty: none), c.perf_name,
//      c.cost (bytes and FLOPs: the op graph's formula for the op, docs/opgraph.md, or a comment saying what is
//      counted) and c.perf (device buffers on random data and a launch of rotated set i on a stream).
//   3. Declare the family's function in tests/kernels/op_cases/cases.h and add it to the table in op_cases.cpp. Nothing
//      else: both drivers pick it up (kernel_bench --list shows the perf rows without a GPU).
//   Checks that are no case × shape × variant product (argument rejection, graph replays, invariants) stay plain
//   TESTs in tests/kernels/<op>_gpu_test.cpp beside the table. What such a test shares with the case (inputs, the
//   reference, device calls) goes in tests/kernels/op_cases/<family>_data.h; case_rng(name, shape) gives it the
//   generator the case drew its data from.
#pragma once

#include "core/hardware.h"
#include "core/op_graph.h"
#include "tests/kernels/op_cases/device_data.h"

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace k3::gpu_test {

// One shape of a case: named dimensions, e.g. {rows 3, width 4093, pad 5}.
struct Shape {
  std::vector<std::pair<std::string, int64_t>> dims;
  int64_t operator[](const std::string& name) const;  // throws k3::Error for a name the shape lacks
  std::string label() const;                          // "rows3_width4093_pad5": a test name
  std::string text() const;                           // "rows 3, width 4093, pad 5": for messages
};
inline Shape shape(std::vector<std::pair<std::string, int64_t>> dims) { return Shape{std::move(dims)}; }

// The generator a case's CPU half gets for one shape: seeded from the case's name and the shape, so a failure
// reproduces and a plain test can rebuild the data a case was checked on.
std::mt19937 case_rng(const std::string& case_name, const Shape& s);

// One value of an op's …Algorithm enum (or of a case's own list, e.g. output dtypes), with its name.
struct Variant {
  std::string name;
  int value = 0;
};
template <typename Enum>
Variant variant(Enum value, std::string name) {
  return Variant{std::move(name), static_cast<int>(value)};
}
template <typename Enum>
Enum algorithm_of(const Variant& v) {
  return static_cast<Enum>(v.value);
}

// The outcome of one comparison; the test driver turns each into a GoogleTest expectation.
struct Check {
  std::string what;
  bool passed = false;
  std::string detail;  // e.g. "error 0.012 > tolerance 0.008"
};

class Checks {
 public:
  // error ≤ tolerance (an infinite error, from a NaN in the GPU result, fails).
  void near(const std::string& what, double error, double tolerance);
  void expect(bool ok, const std::string& what, const std::string& detail = "");
  // Counts of mismatching elements and the like: passes when `count` is 0.
  void none(const std::string& what, int64_t count);
  template <typename A, typename B>
  void equal(const std::string& what, const A& got, const B& want) {
    expect(got == want, what, fmt::format("got {} want {}", fmt_value(got), fmt_value(want)));
  }
  const std::vector<Check>& all() const { return checks_; }

 private:
  template <typename T>
  static std::string fmt_value(const T& v) {
    if constexpr (std::is_enum_v<T>) {
      return std::to_string(static_cast<long long>(v));
    } else if constexpr (std::is_arithmetic_v<T>) {
      return fmt::format("{}", v);
    } else {
      return "(value)";
    }
  }
  std::vector<Check> checks_;
};

// The GPU half of a test: runs the kernel for one variant on inputs the CPU half prepared, records its checks.
using GpuRun = std::function<void(const Variant&, Checks&)>;

// How a perf row is timed (bench/gpu/bench_harness.h):
//   alone        — the median of single launches, inputs rotated (a bandwidth-sized launch);
//   latency      — both as one launch and per launch of 32 replayed from one CUDA graph (a decode step's small op,
//                  whose inputs are the L2-resident outputs of the op before it: no rotation unless it rotates its
//                  weights, rotated_bytes > 0);
//   layer_graph  — per launch of a graph holding one launch per set (one layer each, `sets` of them), as a decode
//                  step replays one launch per layer.
enum class Timing { alone, latency, layer_graph };

// What the roofline needs of one perf row.
struct Cost {
  double bytes = 0, flops = 0;
  EfficiencyClass cls = EfficiencyClass::elementwise;
  ComputeType compute = ComputeType::fp32;
  Timing timing = Timing::alone;
  double rotated_bytes = 0;  // bytes each rotated set holds (0: one set); layer_graph: sets = layers below
  int layers = 0;            // layer_graph only: the launches (each its own set) in the graph
};

// The device side of one perf row: buffers on random data (owned by the closure) and a launch of set `set`.
using Launch = std::function<void(int set, cudaStream_t stream)>;

struct OpCase {
  OpCase(std::string case_name, OpKind op_kind) : name(std::move(case_name)), kind(op_kind) {}

  std::string name;  // the kernel entry point it tests, e.g. "rmsnorm_f32_to_bf16"
  OpKind kind;       // the op graph's kind of op it implements (core/op_graph.h)

  std::vector<Shape> shapes;      // empty: perf only (a ceiling, or a timing of an op another case tests)
  std::vector<Variant> variants;  // one entry named "default" when the op has no …Algorithm enum
  // The CPU half: random inputs and the reference; returns the GPU half. Record reference sanity in `cpu`.
  std::function<GpuRun(const Shape&, std::mt19937&, Checks& cpu)> test;

  std::vector<Shape> perf_shapes;                                      // empty: not in perf mode
  std::vector<Variant> perf_variants;                                  // the variants kernel_bench times
  std::function<std::string(const Shape&, const Variant&)> perf_name;  // the JSON row's "op"
  std::function<Cost(const Shape&)> cost;
  // Buffers for `sets` rotated copies of the inputs and the launch; called once per perf row.
  std::function<Launch(const Shape&, const Variant&, int sets)> perf;
};

// The table: every case, in the order kernel_bench prints its rows (tests/kernels/op_cases/op_cases.cpp).
const std::vector<OpCase>& op_cases();

// The single variant of an op without an …Algorithm enum.
inline std::vector<Variant> single_variant() { return {Variant{"default", 0}}; }

}  // namespace k3::gpu_test
