#include "gui/model/breakdown_bars.h"

#include <algorithm>

namespace k3::gui {
namespace {

Bar bar_of(const std::string& title, const std::vector<GroupRow>& groups) {
  Bar b{title, {}, 0};
  for (const GroupRow& g : groups) {
    if (g.time_us > 0) b.segments.push_back({g.group, g.time_us, 0});
    b.total += std::max(g.time_us, 0.0);
  }
  std::stable_sort(b.segments.begin(), b.segments.end(),
                   [](const BarSegment& a, const BarSegment& c) { return a.value > c.value; });
  for (BarSegment& s : b.segments) s.share_percent = b.total > 0 ? s.value / b.total * 100.0 : 0.0;
  return b;
}

}  // namespace

std::vector<Bar> step_time_bars(const PredictionData& p) {
  return {bar_of("Layer kind", p.by_layer_kind), bar_of("Module", p.by_module), bar_of("Op kind", p.by_kind()),
          bar_of("Bound", p.by_bound)};
}

std::vector<std::string> segments_of_op(const PredictionData& p, int op) {
  const PredictedOpRow& o = p.ops.at(static_cast<std::size_t>(op));
  // A layer's kind shows in its attention ops' module (sim/predict.cpp groups by the model's schedule).
  std::string layer_kind = "embed+head";
  for (const PredictedOpRow& other : p.ops) {
    if (o.layer == 0 || other.layer != o.layer) continue;
    if (other.module == "kda") layer_kind = "KDA layers";
    if (other.module == "mla") layer_kind = "MLA layers";
  }
  return {layer_kind, o.module, o.kind, o.bound};
}

MemoryBar memory_bar(const PredictionData& p) {
  MemoryBar m;
  m.bar.title = "Memory per GPU";
  const std::pair<const char*, double> parts[] = {{"weights", p.weights_bytes},
                                                  {"KV cache", p.kv_bytes},
                                                  {"KDA state", p.kda_state_bytes},
                                                  {"activations", p.activation_bytes},
                                                  {"reserve", p.reserved_bytes}};
  for (const auto& [name, bytes] : parts) {
    if (bytes > 0) m.bar.segments.push_back({name, bytes, 0});
    m.bar.total += bytes;
  }
  for (BarSegment& s : m.bar.segments) s.share_percent = m.bar.total > 0 ? s.value / m.bar.total * 100.0 : 0.0;
  m.usable_bytes = p.usable_bytes;
  m.fits = p.fits;
  m.max_batch = p.max_batch_at_context;
  return m;
}

}  // namespace k3::gui
