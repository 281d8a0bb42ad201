// The timeline's data model (Tracy's shape: a level-of-detail index that knows nothing of the UI): the trace's
// GPU work as tracks, each sorted by start with a prefix maximum of end times, so that what one screen shows is
// found by binary search and sub-pixel events are merged into counted runs (Tracy's collapsed zones) in
// O(pixels · log n), however many events the trace holds. Qt-free.
//
// Tracks, in display order:
//   steps      the "step N" ranges (profiler/attribution), else one span per op-instance number;
//   predicted  the prediction's ops back to back with their predicted exposed time, from each step's start;
//   ops        per device: each op instance projected onto the GPU, from its first attributed kernel's start to
//              its last one's end (how CUDA-graph replays, which have no ranges, get op spans);
//   stream     per (device, stream): its kernels, copies and sets.
#pragma once

#include "gui/model/prediction_data.h"
#include "profiler/trace/trace.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace k3::gui {

enum class TrackKind { steps, predicted, ops, stream };

// One track's spans, sorted by start; `max_end_ns[i]` is the largest end among spans 0..i (non-decreasing, so
// the first span that can reach a time is a binary search away even when spans overlap).
struct TimelineTrack {
  TrackKind kind = TrackKind::stream;
  std::string label;  // "steps", "predicted", "GPU 0 ops", "GPU 0 stream 13"
  std::int32_t device = profiler::kNone, stream = profiler::kNone;
  std::vector<std::int64_t> start_ns, end_ns, max_end_ns;
  // Stream tracks: the trace row of each span; other tracks: the span's index in TimelineIndex::spans().
  std::vector<std::uint32_t> ref;
  std::size_t size() const { return start_ns.size(); }
};

// A span that is not a trace event: a step, an op instance on the GPU or a predicted op.
struct DerivedSpan {
  std::uint32_t name = 0;                   // index into TimelineIndex::names()
  std::int32_t op = profiler::kNone;        // op name index (ops and predicted tracks), kNone for steps
  std::int64_t instance = profiler::kNone;  // op instance or step number
  std::uint32_t kernels = 0;                // GPU events attributed to it (ops and steps tracks)
  std::int64_t busy_ns = 0;                 // their summed durations
};

// What to draw: one span (count == 1) or a run of `count` spans narrower than a pixel merged into one.
struct DrawSpan {
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint32_t count = 0;
  std::uint32_t first = 0;  // the track index of the (first) span
  bool collapsed() const { return count > 1; }
};

// What a user sees of one span: its name, op and times.
struct SpanInfo {
  std::string name;  // kernel name, op name, "step 3"
  std::string op;    // attributed or predicted op; "" if none
  std::int64_t instance = profiler::kNone;
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t trace_row = -1;  // stream tracks: the trace event; -1 otherwise
  profiler::EventKind event_kind = profiler::EventKind::range;
};

class TimelineIndex {
 public:
  // Indexes `trace` (kept alive by the index); `prediction` (may be null) gives op kinds and the predicted lane.
  TimelineIndex(std::shared_ptr<const profiler::Trace> trace, const PredictionData* prediction);

  // Rebuilds the predicted lane and the op kinds for another prediction (null: no lane, kinds from core/op_names).
  void set_prediction(const PredictionData* prediction);

  const profiler::Trace& trace() const { return *trace_; }
  const std::vector<TimelineTrack>& tracks() const { return tracks_; }
  const std::vector<DerivedSpan>& spans() const { return spans_; }
  const std::vector<std::string>& names() const { return names_; }
  std::int64_t begin_ns() const { return begin_ns_; }  // first GPU event's start (or any event's)
  std::int64_t end_ns() const { return end_ns_; }      // last end
  int track_of(TrackKind kind, std::int32_t device = profiler::kNone) const;  // first such track, -1 if none

  // The spans of `track` that meet [t0_ns, t1_ns] (start < t1 and end >= t0), as drawn `width_px` wide: spans at
  // least `min_px` wide one by one, runs of narrower spans with gaps under `min_px` merged. Every span that meets
  // the range is in exactly one DrawSpan. Appends to `out`.
  void query(int track, std::int64_t t0_ns, std::int64_t t1_ns, double width_px, std::vector<DrawSpan>* out,
             double min_px = 1.0) const;
  // The span of `track` under time `t_ns` (the narrowest one that holds it, else the nearest within
  // `tolerance_ns`), or -1.
  std::int64_t span_at(int track, std::int64_t t_ns, std::int64_t tolerance_ns) const;
  SpanInfo info(int track, std::uint32_t i) const;
  // The op name index of span i of `track` (kNone when none): kernels' attributed op, op and predicted spans' op.
  std::int32_t op_of(int track, std::uint32_t i) const;

  // Op kind of an op name index, for colours and statistics: the prediction's kind, else core/op_names' kind,
  // else "other"; "unattributed" for kNone.
  const std::string& kind_of(std::int32_t op) const;
  // Op name index of `name`, or kNone.
  std::int32_t find_name(const std::string& name) const;

  // GPU rows of an ops-track span (its kernels, copies and sets), from the derived span's index.
  const std::uint32_t* span_rows_begin(std::uint32_t span) const { return span_rows_.data() + span_row_offset_[span]; }
  const std::uint32_t* span_rows_end(std::uint32_t span) const {
    return span_rows_.data() + span_row_offset_[span + 1];
  }

  // Bytes this index holds (its columns and tables), for the benchmark's memory account.
  std::size_t bytes() const;

 private:
  void build_stream_tracks();
  void build_op_tracks();
  void build_steps_track();
  void build_predicted_track();
  void set_kinds(const PredictionData* prediction);
  std::uint32_t intern(const std::string& s);
  static void finish(TimelineTrack* t);

  std::shared_ptr<const profiler::Trace> trace_;
  std::vector<std::string> names_;  // the trace's names, then step and predicted names
  std::vector<TimelineTrack> tracks_;
  std::vector<DerivedSpan> spans_;
  std::vector<std::uint32_t> span_row_offset_, span_rows_;  // CSR: derived span -> GPU rows (ops spans only)
  std::vector<std::string> kind_of_name_;                   // per name index
  std::vector<PredictedOpRow> predicted_ops_;
  std::int64_t begin_ns_ = 0, end_ns_ = 0;
};

}  // namespace k3::gui
