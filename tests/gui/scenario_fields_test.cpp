// The what-if fields against the scenario reader: every key and every choice goes through parse_scenario
// on the default scenario, and is either accepted or rejected with one of the reader's documented
// messages (docs/scenarios.md, "Validation"); the shown values are what the reader used.
#include "gui/model/scenario_fields.h"

#include "cli/default_scenario.h"
#include "core/error.h"
#include "core/scenario.h"
#include "gui/model/document.h"

#include <QTest>

#include <set>

using k3::gui::Document;
using k3::gui::FieldKind;
using k3::gui::ScenarioField;

namespace {
const std::string kSource = K3PERF_SOURCE_DIR;
k3::DataPaths data() { return k3::DataPaths::under(kSource + "/scenarios"); }

// The rejections docs/scenarios.md documents, as the messages word them.
const std::vector<std::string> kDocumentedRejections = {
    "GPUs given, but tp",                             // gpus = tp x attention_dp x pp
    "does not divide the",                            // heads, experts
    "must divide tp x attention_dp",                  // ep
    "which does not divide their intermediate size",  // moe_tp
    "needs ep > 1",                                   // attention_dp
    "exceeds the",                                    // pp > layers, context > positions
    "is smaller than attention_dp",                   // batch
    "tensor-core rate",                               // gemm_compute
    "missing required key 'workload.new_tokens'",     // prefill needs the prompt
    "missing required key 'workload.draft_tokens'",   // verify needs the drafts
};

bool documented(const std::string& message) {
  for (const std::string& m : kDocumentedRejections) {
    if (message.find(m) != std::string::npos) return true;
  }
  return false;
}

const ScenarioField& field(const std::vector<ScenarioField>& fields, const std::string& key) {
  for (const ScenarioField& f : fields) {
    if (f.key == key) return f;
  }
  throw std::runtime_error("no field " + key);
}
}  // namespace

class ScenarioFieldsTest : public QObject {
  Q_OBJECT

 private slots:
  void every_choice_is_read_or_rejected_as_documented() {
    const std::vector<ScenarioField> fields = k3::gui::scenario_fields(data());
    std::set<std::string> keys;
    int accepted = 0, rejected = 0;
    for (const ScenarioField& f : fields) {
      QVERIFY2(keys.insert(f.key).second, f.key.c_str());
      std::vector<std::string> values = f.choices;
      if (f.kind == FieldKind::boolean) values = {"true", "false"};
      QVERIFY2(!values.empty(), f.key.c_str());
      // A key of another phase is set together with that phase, as the editor shows it.
      std::vector<std::string> phase_set;
      if (!f.applies_to("decode")) phase_set.push_back("phase=" + f.phases.front());
      int field_accepted = 0;
      for (const std::string& v : values) {
        std::vector<std::string> sets = phase_set;
        sets.push_back(f.key + "=" + v);
        try {
          k3::parse_scenario(k3::cli::kDefaultScenarioYaml, "<default>", data(), sets);
          ++field_accepted;
        } catch (const k3::InputError& e) {
          const std::string message = e.what();
          QVERIFY2(documented(message), (f.key + "=" + v + ": " + message).c_str());
          // An edit's own value error names the edit; a combination error names the scenario.
          QVERIFY2(message.find("<default>") != std::string::npos, message.c_str());
          ++rejected;
        }
      }
      QVERIFY2(field_accepted > 0, f.key.c_str());
      accepted += field_accepted;
    }
    qInfo("%d choices read, %d rejected as documented", accepted, rejected);
    QVERIFY(accepted > 50);
  }

  void the_choices_are_the_data_folders_names() {
    const std::vector<ScenarioField> fields = k3::gui::scenario_fields(data());
    const ScenarioField& model = field(fields, "model");
    QVERIFY(std::find(model.choices.begin(), model.choices.end(), "kimi-k3") != model.choices.end());
    QCOMPARE(model.choices, k3::list_names(data().models_dir, ".json"));
    QCOMPARE(field(fields, "hardware").choices, k3::list_names(data().hardware_dir, ".yaml"));
  }

  void shown_values_are_what_the_reader_used() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    const std::vector<ScenarioField> fields = k3::gui::scenario_fields(data());
    const k3::Scenario s = k3::parse_scenario(k3::cli::kDefaultScenarioYaml, "<default>", data());
    // From the YAML.
    QCOMPARE(k3::gui::shown_value(field(fields, "parallelism.tp"), d), std::to_string(s.parallelism.tp));
    QCOMPARE(k3::gui::shown_value(field(fields, "hardware"), d), std::string("gb300-nvl72"));
    // Absent from the YAML: the checkpoint's and the reader's defaults, from the prediction's echo.
    QCOMPARE(k3::gui::shown_value(field(fields, "precision.routed_experts"), d),
             k3::to_string(s.precision.routed_experts));
    QCOMPARE(k3::gui::shown_value(field(fields, "parallelism.pp"), d), std::string("1"));
    QCOMPARE(k3::gui::shown_value(field(fields, "overrides.attention"), d), std::string("as_published"));
    QCOMPARE(k3::gui::shown_value(field(fields, "overrides.attnres"), d), std::string("true"));
    d.set_edit("overrides.attnres", "no");
    QCOMPARE(k3::gui::shown_value(field(fields, "overrides.attnres"), d), std::string("false"));
    d.set_edit("overrides.attention", "all_mla");
    QVERIFY(d.error().empty());
    QCOMPARE(k3::gui::echoed_value("overrides.attention", *d.prediction()), std::string("all_mla"));
  }

  void cached_values_are_shown_values() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    const std::vector<ScenarioField> fields = k3::gui::scenario_fields(data());
    k3::gui::FieldValues values;
    const std::vector<std::pair<std::string, std::string>> edits = {
        {"workload.batch", "64"}, {"overrides.attnres", "no"}, {"workload.batch", ""}, {"parallelism.tp", "7"}};
    for (const auto& [key, value] : edits) {
      d.set_edit(key, value);
      values.refresh(d);
      for (const ScenarioField& f : fields) QCOMPARE(values.shown(f, d), k3::gui::shown_value(f, d));
    }
    QCOMPARE(values.shown(field(fields, "workload.batch"), d), std::string("8"));  // the edit removed: the YAML's
    d.set_scenario("model: kimi-k3\nhardware: h200-sxm\nworkload:\n  batch: 2\n", "<other>");
    values.refresh(d);
    QCOMPARE(values.shown(field(fields, "hardware"), d), std::string("h200-sxm"));
    QCOMPARE(values.shown(field(fields, "workload.batch"), d), std::string("2"));
  }

  void an_opened_prediction_shows_its_echo() {
    Document d(data());
    d.open(kSource + "/bench/results/2026-12-01-h200-engine-traces-9/pred_decode_b1_ctx8192.json");
    QVERIFY(!d.has_scenario());
    const std::vector<ScenarioField> fields = k3::gui::scenario_fields(data());
    QCOMPARE(k3::gui::shown_value(field(fields, "model"), d), d.prediction()->model);
    QCOMPARE(k3::gui::shown_value(field(fields, "hardware"), d), std::string("H200 SXM"));
    QCOMPARE(k3::gui::shown_value(field(fields, "workload.context_tokens"), d), std::string("8192"));
  }

  void a_phase_change_drops_the_edits_of_the_old_phase() {
    Document d(data());
    d.set_scenario(k3::cli::kDefaultScenarioYaml, "<default>");
    const std::vector<ScenarioField> fields = k3::gui::scenario_fields(data());
    for (const auto& [key, value] : k3::gui::edits_for(field(fields, "phase"), "prefill", fields, d)) {
      d.set_edit(key, value);
    }
    QVERIFY(d.error().find("workload.new_tokens") != std::string::npos);  // a prompt is needed
    d.set_edit("workload.new_tokens", "4096");
    QVERIFY2(d.error().empty(), d.error().c_str());
    QCOMPARE(d.prediction()->phase, std::string("prefill"));
    const auto back = k3::gui::edits_for(field(fields, "phase"), "decode", fields, d);
    QCOMPARE(back.size(), std::size_t{2});
    QCOMPARE(back[0].first, std::string("workload.new_tokens"));
    QCOMPARE(back[0].second, std::string(""));
    for (const auto& [key, value] : back) d.set_edit(key, value);
    QVERIFY2(d.error().empty(), d.error().c_str());
    QCOMPARE(d.prediction()->phase, std::string("decode"));
  }
};

QTEST_GUILESS_MAIN(ScenarioFieldsTest)
#include "scenario_fields_test.moc"
