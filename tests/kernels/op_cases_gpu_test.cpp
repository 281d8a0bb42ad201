// Test mode of the GPU op harness (tests/kernels/op_cases/op_case.h): one GoogleTest test per case × shape × variant of
// the table, named GpuOp_<case>.<shape>/<variant>. Each runs the case's CPU reference on fresh random inputs (seeded
// from the case and shape, so a failure reproduces), then, where a CUDA device is present, the kernel.
#include "gpu_harness.h"
#include "tests/kernels/op_cases/op_case.h"

#include <functional>
#include <set>
#include <string>

namespace k3::gpu_test {
namespace {

void report(const Checks& checks, const std::string& side) {
  for (const Check& c : checks.all()) EXPECT_TRUE(c.passed) << side << ": " << c.what << ": " << c.detail;
}

// The CPU half of the last (case, shape) asked for: the variants of one shape run one after another, so the
// reference is computed once per shape.
struct Prepared {
  std::string key;
  Checks cpu;
  GpuRun gpu;
};
const Prepared& prepare(const OpCase& c, const Shape& s) {
  static Prepared last;
  const std::string key = c.name + "/" + s.label();
  if (last.key != key) {
    last = Prepared{key, {}, {}};
    std::mt19937 rng = case_rng(c.name, s);
    last.gpu = c.test(s, rng, last.cpu);
  }
  return last;
}

class OpCaseTest : public ::testing::Test {
 public:
  OpCaseTest(const OpCase& c, Shape s, Variant v) : case_(c), shape_(std::move(s)), variant_(std::move(v)) {}
  void TestBody() override {
    const Prepared& prepared = prepare(case_, shape_);
    report(prepared.cpu, "reference " + shape_.text());
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device: GPU side skipped";
    Checks gpu;
    prepared.gpu(variant_, gpu);
    report(gpu, shape_.text() + ", " + variant_.name);
  }

 private:
  const OpCase& case_;
  Shape shape_;
  Variant variant_;
};

// Registered before main runs (gtest_main): GoogleTest lists and filters them like TEST()s.
const bool kRegistered = [] {
  std::set<std::string> names;
  for (const OpCase& c : op_cases()) {
    const std::string suite = "GpuOp_" + c.name;
    if (!names.insert(suite).second) throw Error("op harness: two cases named " + c.name);
    for (const Shape& s : c.shapes) {
      for (const Variant& v : c.variants) {
        ::testing::RegisterTest(suite.c_str(), (s.label() + "/" + v.name).c_str(), nullptr, s.text().c_str(), __FILE__,
                                __LINE__, [&c, s, v]() -> ::testing::Test* { return new OpCaseTest(c, s, v); });
      }
    }
  }
  return true;
}();

// The table itself: unique shapes per case, a test wherever a case has test shapes (else perf rows), perf rows
// complete where a case has them and their names unique (bench/results comparisons join on them).
TEST(GpuOpTable, CasesAreComplete) {
  ASSERT_FALSE(op_cases().empty());
  std::set<std::string> rows;
  for (const OpCase& c : op_cases()) {
    EXPECT_TRUE(!c.shapes.empty() || !c.perf_shapes.empty()) << c.name;
    if (!c.shapes.empty()) {
      EXPECT_TRUE(bool(c.test)) << c.name;
      EXPECT_FALSE(c.variants.empty()) << c.name;
    }
    std::set<std::string> labels;
    for (const Shape& s : c.shapes) EXPECT_TRUE(labels.insert(s.label()).second) << c.name << " " << s.label();
    if (!c.perf_shapes.empty()) {
      EXPECT_TRUE(c.perf_name && c.cost && c.perf) << c.name;
      EXPECT_FALSE(c.perf_variants.empty()) << c.name;
      for (const Shape& s : c.perf_shapes) {
        const Cost cost = c.cost(s);
        EXPECT_GT(cost.bytes, 0) << c.name << " " << s.text();
        if (cost.timing == Timing::layer_graph) {
          EXPECT_GT(cost.layers, 1) << c.name << " " << s.text();
        }
        for (const Variant& v : c.perf_variants) {
          EXPECT_TRUE(rows.insert(c.perf_name(s, v)).second) << "two rows named " << c.perf_name(s, v);
        }
      }
    }
  }
}

}  // namespace
}  // namespace k3::gpu_test
