// The timeline at scale: a synthetic but decode-shaped trace of 1,000,000 GPU events (the ops of a recorded
// prediction, step after step, their kernels on two streams, copies between steps), written as .json.gz with
// write_chrome_trace and opened again, then:
//   open      read_trace and the TimelineIndex build, timed apart (the reader belongs to profiler/trace);
//   memory    peak resident set (VmHWM) while reading and while indexing, the resident set after open, and the
//             index's own bytes;
//   repaint   TimelineCanvas rendered into a 1600×900 image fully zoomed out and at five zoom levels around the
//             trace's middle, median of 20 renders each.
// Targets (k3perf issue 26): open ≤ 2 s, repaint ≤ 16 ms zoomed out and ≤ 8 ms zoomed in, memory ≤ 300 MB.
//   k3perf_bench_gui [events] [output.json.gz]      prints one JSON object
#include "gui/model/prediction_data.h"
#include "gui/model/timeline_index.h"
#include "gui/views/timeline_canvas.h"
#include "profiler/trace/chrome_json.h"

#include <QApplication>
#include <QDir>
#include <QImage>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A field of /proc/self/status ("VmHWM", "VmRSS") in bytes; 0 where there is no /proc.
long long status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// Restarts VmHWM from the current resident set (Linux ≥ 4.0), so that a peak belongs to what follows.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// Steps of the prediction's ops until `events` GPU events: each op's kernels (1 to 12, its predicted time split
// among them with ±20 % jitter), routed experts on a second stream overlapping the first, a memcpy per step.
k3::profiler::Trace synthetic_trace(const k3::gui::PredictionData& p, std::size_t events) {
  k3::profiler::Trace trace;
  trace.reserve(events + events / 400);
  std::mt19937 rng(26);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  std::uniform_int_distribution<int> kernels(1, 12), gap_ns(300, 2500);
  const std::vector<std::string> kernel_names = {
      "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)",
      "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(cublasLt::cublasSplitKParams<float>)",
      "k3::kernels::rmsnorm_warp_per_row(__nv_bfloat16 const*, __nv_bfloat16*, int)",
      "k3::kernels::moe_grouped_gemm_mxfp4(k3::kernels::MoeParams)",
      "k3::kernels::attnres_mix_vec8(float const*)",
      "k3::kernels::mla_decode_split_kv(k3::kernels::MlaParams)"};
  std::int64_t t = 1'000'000;
  std::size_t n = 0;
  for (std::int64_t step = 0; n < events; ++step) {
    const std::int64_t step_start = t;
    for (const k3::gui::PredictedOpRow& op : p.ops) {
      const int count = kernels(rng);
      const bool side_stream = op.kind == "moe_experts";
      const double each_ns = std::max(400.0, op.time_us * 1e3 / count);
      for (int k = 0; k < count && n < events; ++k, ++n) {
        k3::profiler::Event e;
        e.name = kernel_names[(static_cast<std::size_t>(k) + op.name.size()) % kernel_names.size()];
        e.device = 0;
        e.stream = side_stream && k % 2 ? 14 : 13;
        e.start_ns = t;
        e.end_ns = t + std::llround(each_ns * jitter(rng));
        e.op = op.name;
        e.op_instance = step;
        e.correlation = n + 1;
        trace.add(e);
        t = (e.stream == 14 ? t + 200 : e.end_ns) + gap_ns(rng) / 4;
      }
    }
    k3::profiler::Event copy;
    copy.kind = k3::profiler::EventKind::memcpy;
    copy.name = "memcpy_dtoh";
    copy.device = 0;
    copy.stream = 13;
    copy.start_ns = t;
    copy.end_ns = t + 1500;
    copy.bytes = 8;
    if (n < events) trace.add(copy), ++n;
    k3::profiler::Event range;
    range.kind = k3::profiler::EventKind::range;
    range.name = "step " + std::to_string(step);
    range.thread = k3::profiler::kStepTrackThread;
    range.start_ns = step_start;
    range.end_ns = t + 1500;
    trace.add(range);
    t += 1500 + 20'000;  // the host's turn between steps
  }
  trace.sort();
  return trace;
}

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const std::size_t events = argc > 1 ? std::stoul(argv[1]) : 1'000'000;
  const std::string path = argc > 2 ? argv[2] : (QDir::tempPath() + "/k3perf_bench_gui_trace.json.gz").toStdString();
  const std::string pred_path =
      std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-01-h200-engine-traces-9/pred_decode_b1_ctx131072.json";
  std::ifstream pred_in(pred_path);
  const k3::gui::PredictionData prediction =
      k3::gui::prediction_from_json(nlohmann::ordered_json::parse(pred_in), pred_path);

  nlohmann::ordered_json out;
  {
    const k3::profiler::Trace trace = synthetic_trace(prediction, events);
    out["events"] = trace.size();
    k3::profiler::write_chrome_trace(trace, path);
  }
  out["file_bytes"] = std::filesystem::file_size(path);
  reset_peak_rss();  // the synthetic trace and its writing are not part of opening it
  out["rss_before_open_bytes"] = status_bytes("VmRSS");

  auto t0 = Clock::now();
  auto trace = std::make_shared<const k3::profiler::Trace>(k3::profiler::read_trace(path));
  out["read_trace_ms"] = ms_since(t0);
  out["read_trace_peak_rss_bytes"] = status_bytes("VmHWM");
  out["rss_after_read_bytes"] = status_bytes("VmRSS");
  reset_peak_rss();
  t0 = Clock::now();
  auto index = std::make_shared<const k3::gui::TimelineIndex>(trace, &prediction);
  out["index_build_ms"] = ms_since(t0);
  out["index_build_peak_rss_bytes"] = status_bytes("VmHWM");
  out["open_ms"] = out["read_trace_ms"].get<double>() + out["index_build_ms"].get<double>();
  out["rss_after_open_bytes"] = status_bytes("VmRSS");
  out["index_bytes"] = index->bytes();
  std::filesystem::remove(path);

  k3::gui::TimelineCanvas canvas;
  canvas.resize(1600, 900);
  canvas.set_index(index);
  QImage image(1600, 900, QImage::Format_ARGB32_Premultiplied);
  const std::int64_t mid = (index->begin_ns() + index->end_ns()) / 2;
  const std::int64_t whole = canvas.view_t1_ns() - canvas.view_t0_ns();
  nlohmann::ordered_json repaint = nlohmann::ordered_json::array();
  for (double zoom : {1.0, 10.0, 100.0, 1e3, 1e4, 1e5}) {
    if (zoom > 1) {
      const auto half = static_cast<std::int64_t>(static_cast<double>(whole) / zoom / 2);
      canvas.set_view(mid - half, mid + half);
    }
    std::vector<double> ms;
    for (int r = 0; r < 21; ++r) {
      const auto start = Clock::now();
      canvas.render(&image);
      if (r > 0) ms.push_back(ms_since(start));  // the first render warms caches and fonts
    }
    repaint.push_back({{"zoom", zoom},
                       {"window_ns", canvas.view_t1_ns() - canvas.view_t0_ns()},
                       {"drawn_spans", canvas.last_drawn_spans()},
                       {"median_ms", median_ms(ms)},
                       {"max_ms", *std::max_element(ms.begin(), ms.end())}});
  }
  out["repaint_1600x900"] = repaint;
  out["rss_end_bytes"] = status_bytes("VmRSS");
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
