// core/registry.h: a duplicate name is refused with both implementations named, an unknown name
// lists the known ones, and an implementation's parameters are required or defaulted, with errors
// naming the file, the key and the implementation. A claim evaluator registered from this file
// alone is chosen by name from a claim file.
#include "core/registry.h"
#include "expect_input_error.h"
#include "sim/claims/claim.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace k3 {
namespace {

struct Shape {
  static constexpr const char* kind = "shape";
  virtual ~Shape() = default;
  virtual double area() const = 0;
};

class Square : public Shape {
 public:
  explicit Square(const Params& p)
      : side_(p.param<double>("side_m").required()), scale_(p.param<int>("scale").default_val(1)) {}
  double area() const override { return side_ * side_ * scale_; }

 private:
  double side_;
  int scale_;
};

class Unit : public Shape {
 public:
  double area() const override { return 1; }
};

Registry<Shape>& shapes() {
  static Registry<Shape> r;  // a registry of its own, so the test's adds do not leak into others
  return r;
}

std::unique_ptr<Shape> make_square(const Params& p) { return std::make_unique<Square>(p); }
std::unique_ptr<Shape> make_unit(const Params&) { return std::make_unique<Unit>(); }

TEST(Registry, RefusesADuplicateNamingBoth) {
  Registry<Shape> r;
  r.add("square", "Square", make_square);
  try {
    r.add("square", "OtherSquare", make_unit);
    ADD_FAILURE() << "a duplicate name was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* f : {"two shapes registered as 'square'", "Square", "OtherSquare"}) {
      EXPECT_NE(msg.find(f), std::string::npos) << msg;
    }
  }
}

TEST(Registry, AnUnknownNameListsTheKnownOnes) {
  Registry<Shape>& r = shapes();
  if (!r.contains("unit")) r.add("unit", "Unit", make_unit);
  if (!r.contains("square")) r.add("square", "Square", make_square);
  test::expect_input_error([&] { r.make("circle", {}, "shapes.yaml: key 'shape'"); },
                           {"shapes.yaml: key 'shape': unknown shape 'circle' (known: square, unit)"});
  EXPECT_EQ(r.names(), (std::vector<std::string>{"square", "unit"}));
  EXPECT_EQ(r.make("unit")->area(), 1);
}

TEST(Registry, ParametersAreRequiredOrDefaultedAndErrorsNameFileKeyAndImplementation) {
  Registry<Shape>& r = shapes();
  if (!r.contains("square")) r.add("square", "Square", make_square);
  auto from = [&](const std::string& yaml) { return r.make(YamlNode::load_string(yaml, "shapes.yaml")["shape"]); };
  EXPECT_EQ(from("shape: {name: square, side_m: 3}")->area(), 9);  // scale defaulted
  EXPECT_EQ(from("shape: {name: square, side_m: 3, scale: 2}")->area(), 18);
  test::expect_input_error([&] { from("shape: square"); },
                           {"shapes.yaml:1", "key 'shape'", "shape 'square'", "missing required parameter 'side_m'"});
  test::expect_input_error(
      [&] { from("shape: {name: square, side_m: x}"); },
      {"shapes.yaml:1", "key 'shape.side_m'", "expected a number", "a parameter of shape 'square'"});
  test::expect_input_error(
      [&] { from("shape: {name: square, side_m: 1, sides: 4}"); },
      {"shapes.yaml:1", "key 'shape.sides'", "shape 'square'", "unknown parameter", "side_m, scale"});
  test::expect_input_error([&] { from("shape: {name: circle}"); },
                           {"shapes.yaml:1", "key 'shape'", "unknown shape 'circle'"});
  // Set in code: a copy edited never changes the original.
  Params p;
  p.set("side_m", 2);
  Params q = p;
  q.set("side_m", 5);
  EXPECT_EQ(r.make("square", p)->area(), 4);
  EXPECT_EQ(r.make("square", q)->area(), 25);
}

// Test-only: predicts `value` (a parameter of the claim) as `figure`.
class ConstantEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths&) const override {
    expect_params(c, {"value"});
    Evaluation e;
    e.predicted["figure"] = param_double(c, "value", 0);
    e.alternatives.push_back({"doubled", {{"figure", 2 * param_double(c, "value", 0)}}});
    return e;
  }
};
K3PERF_REGISTER_CLAIM_EVALUATOR(ConstantEvaluator, "test_constant");

TEST(Registry, ATestClaimEvaluatorIsChosenByNameFromAClaimFile) {
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_registry_test";
  std::filesystem::create_directories(dir);
  const auto file = (dir / "x.yaml").string();
  auto verdict = [&](double reported) {
    std::ofstream(file) << "id: X9\nclaim: c\nsource: s\nevaluator: test_constant\nparams: {value: 3}\n"
                        << "reported:\n  figure: {value: " << reported << ", relative_tolerance: 0.01}\n";
    return check_claim(load_claim(file), test::data()).verdict;
  };
  EXPECT_EQ(verdict(3), Verdict::reproduced);
  EXPECT_EQ(verdict(6), Verdict::explained);
  EXPECT_EQ(verdict(4), Verdict::contradicted);
  std::ofstream(file) << "id: X9\nclaim: c\nsource: s\nevaluator: test_constnat\n";
  test::expect_input_error(
      [&] { load_claim(file); },
      {"x.yaml:4", "evaluator", "unknown claim evaluator 'test_constnat'", "test_constant", "none"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace k3
