// The what-if editor's fields: which scenario keys it edits (docs/scenarios.md), how each is edited
// (a list of choices, an integer with suggested values, a switch) and what it shows. Every field edits
// through Document::set_edit, the `--set` path, so the library alone decides what is valid. UI-free.
#pragma once

#include "core/data_paths.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace k3::gui {

class Document;
struct PredictionData;

enum class FieldKind {
  choice,   // one of `choices`
  integer,  // any text (the reader checks it); `choices` are suggestions
  boolean,  // "true" / "false"
};

struct ScenarioField {
  std::string key;    // scenario key path: "parallelism.tp"
  std::string label;  // "TP"
  std::string group;  // section of the editor: "Parallelism"
  FieldKind kind = FieldKind::choice;
  std::vector<std::string> choices;  // choice: all values; integer: suggestions; boolean: empty
  std::vector<std::string> phases;   // the phases the key belongs to (the reader ignores it elsewhere); empty: all
  bool only_if_in_scenario = false;  // shown only when the scenario YAML has the key (gpus)
  bool applies_to(const std::string& phase) const;
};

// Every field, in the editor's order; model and hardware choices are the names in the data folders.
std::vector<ScenarioField> scenario_fields(const DataPaths& data);

// The value the reader used for `key` according to the prediction's scenario echo, for keys a scenario
// may leave out (precision defaults follow the checkpoint); "" when the echo does not say.
std::string echoed_value(const std::string& key, const PredictionData& p);

// What a field shows: Document::value_of(key), else the echoed value of the current prediction.
std::string shown_value(const ScenarioField& field, const Document& document);

// shown_value for every field of a refresh, reading the scenario YAML once per scenario: Document::value_of
// parses it on each call, and the scenario's own values change only with set_scenario (which clears the
// edits), so they are re-read whenever there are no edits.
class FieldValues {
 public:
  void refresh(const Document& document);  // call first on each refresh
  std::string shown(const ScenarioField& field, const Document& document);

 private:
  std::map<std::string, std::string> scenario_values_;  // key -> the scenario YAML's value ("" if absent)
};

// The `--set` edits that setting `field` to `value` makes, in order: the edit itself, preceded, for a
// phase change, by removing the edits of fields that do not belong to the new phase (the reader rejects
// workload.new_tokens in a decode step).
std::vector<std::pair<std::string, std::string>> edits_for(const ScenarioField& field, const std::string& value,
                                                           const std::vector<ScenarioField>& fields,
                                                           const Document& document);

// "true" for true/True/yes (YAML's booleans as the reader accepts them), "false" otherwise.
bool is_true(const std::string& value);

}  // namespace k3::gui
