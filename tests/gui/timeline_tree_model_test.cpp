// The step → layer → op → kernel tree of a recorded H200 trace, under QAbstractItemModelTester, against the
// trace's own rows grouped here by hand: which ops each step holds, in what order, with how many kernels and
// what span; and the prediction's exposed time in the predicted column.
#include "gui/model/timeline_tree_model.h"
#include "gui/model/timeline_format.h"
#include "profiler/trace/chrome_json.h"

#include <QAbstractItemModelTester>
#include <QTest>

#include <fstream>
#include <map>

using k3::gui::TimelineTreeModel;

namespace {
const std::string kRun = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-01-h200-engine-traces-9";

std::string cell(const QAbstractItemModel& m, const QModelIndex& i, int column) {
  return m.data(m.index(i.row(), column, i.parent())).toString().toStdString();
}
}  // namespace

class TimelineTreeModelTest : public QObject {
  Q_OBJECT

 private slots:
  void a_recorded_step_holds_its_ops_by_layer() {
    auto trace = std::make_shared<const k3::profiler::Trace>(
        k3::profiler::read_trace(kRun + "/trace_decode_b1_ctx131072.json.gz"));
    std::ifstream in(kRun + "/pred_decode_b1_ctx131072.json");
    const auto prediction = k3::gui::prediction_from_json(nlohmann::ordered_json::parse(in), "pred");
    auto index = std::make_shared<const k3::gui::TimelineIndex>(trace, &prediction);
    TimelineTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_index(index, &prediction);
    QCOMPARE(model.rowCount(), 24);

    // By hand: step 1's range, then every (op, instance) whose first GPU event starts inside it.
    std::int64_t step_start = 0, step_end = 0;
    for (std::size_t i = 0; i < trace->size(); ++i) {
      if (trace->thread[i] == k3::profiler::kStepTrackThread && trace->name_of(i) == "step 1") {
        step_start = trace->start_ns[i], step_end = trace->end_ns[i];
      }
    }
    struct Op {
      std::int64_t start = 0, end = 0;
      int events = 0;
    };
    std::map<std::pair<std::string, std::int64_t>, Op> ops;
    std::vector<std::pair<std::string, std::int64_t>> order;
    for (std::size_t i = 0; i < trace->size(); ++i) {
      if (trace->op[i] == k3::profiler::kNone || trace->kind[i] == k3::profiler::EventKind::range) continue;
      const auto key = std::make_pair(trace->op_of(i), trace->op_instance[i]);
      auto [it, added] = ops.emplace(key, Op{trace->start_ns[i], trace->end_ns[i], 0});
      if (added) order.push_back(key);
      it->second.end = std::max(it->second.end, trace->end_ns[i]);
      ++it->second.events;
    }
    std::vector<std::string> expected, got;
    std::string group;
    for (const auto& key : order) {
      const Op& op = ops[key];
      if (op.start < step_start || op.start >= step_end) continue;
      const std::string& name = key.first;
      const std::string g =
          name[0] == 'L' ? "layer " + std::to_string(std::stoi(name.substr(1, 3))) : name.substr(0, name.find('.'));
      if (g != group) expected.push_back(group = g);
      expected.push_back("  " + name + " " + k3::gui::format_duration_ns(static_cast<double>(op.end - op.start)) + " " +
                         std::to_string(op.events));
    }
    const QModelIndex step1 = model.index(1, 0);
    QCOMPARE(cell(model, step1, 0), std::string("step 1"));
    for (int g = 0; g < model.rowCount(step1); ++g) {
      const QModelIndex gi = model.index(g, 0, step1);
      got.push_back(cell(model, gi, 0));
      for (int o = 0; o < model.rowCount(gi); ++o) {
        const QModelIndex oi = model.index(o, 0, gi);
        got.push_back("  " + cell(model, oi, 0) + " " + cell(model, oi, TimelineTreeModel::duration_column) + " " +
                      cell(model, oi, TimelineTreeModel::events_column));
        QCOMPARE(model.rowCount(oi), std::stoi(cell(model, oi, TimelineTreeModel::events_column)));
      }
    }
    QCOMPARE(got, expected);
    QVERIFY(expected.size() > 70);
    QCOMPARE(got[0], std::string("embed"));

    // The predicted column is the prediction's exposed time; kernel rows name their kernels.
    const QModelIndex attn = model.find_op("L004.mla.attn_decode", step_start);
    QVERIFY(attn.isValid());
    QCOMPARE(attn.parent().parent().row(), 1);
    const int p = prediction.find("L004.mla.attn_decode");
    QCOMPARE(cell(model, attn, TimelineTreeModel::predicted_column),
             k3::gui::format_duration_ns(prediction.ops[static_cast<std::size_t>(p)].exposed_us * 1e3));
    const QModelIndex kernel = model.index(0, 0, attn);
    QCOMPARE(model.data(kernel, TimelineTreeModel::kOpRole).toString(), QString("L004.mla.attn_decode"));
    QVERIFY(!cell(model, kernel, 0).empty() && cell(model, kernel, 0).find('(') == std::string::npos);
    model.set_index(nullptr, nullptr);
    QCOMPARE(model.rowCount(), 0);
  }

  void durations_and_kernel_names_read_as_a_person_writes_them() {
    QCOMPARE(k3::gui::format_duration_ns(850), std::string("850 ns"));
    QCOMPARE(k3::gui::format_duration_ns(12345), std::string("12.3 µs"));
    QCOMPARE(k3::gui::format_duration_ns(1.25e6), std::string("1.25 ms"));
    QCOMPARE(k3::gui::format_duration_ns(2.01e9), std::string("2.01 s"));
    QCOMPARE(k3::gui::short_kernel_name("void cublasLt::splitKreduce_kernel<32, 16, int>(cublasLt::Params<float>, "
                                        "float const*)"),
             std::string("cublasLt::splitKreduce_kernel"));
    QCOMPARE(k3::gui::short_kernel_name("rmsnorm_warp_per_row"), std::string("rmsnorm_warp_per_row"));
  }
};

QTEST_GUILESS_MAIN(TimelineTreeModelTest)
#include "timeline_tree_model_test.moc"
