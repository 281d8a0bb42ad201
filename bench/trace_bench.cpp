// Speed of the trace writer: 1 M events (kernels on 8 streams, their launch API calls and op
// ranges, the mix of a decode trace) to Chrome JSON, then gzip at zlib's fastest and default
// levels. The target is 1 M events written, gzip included, in at most 2 s. Speed of the reader:
// 1 M engine-like kernel events (bench/engine_trace.h) from a string and from a .json.gz file;
// target 2 s (its peak memory: bench/trace_read.cpp, in a fresh process).
#include "bench/engine_trace.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/gzip.h"

#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>

namespace {

k3::profiler::Trace make_trace(std::size_t events) {
  using k3::profiler::Event;
  using k3::profiler::EventKind;
  k3::profiler::Trace t;
  t.reserve(events);
  t.metadata["source"] = "synthetic benchmark trace";
  std::int64_t now = 1'700'000'000'000'000'000;
  for (std::size_t i = 0; t.size() < events; ++i) {
    const std::string op = fmt::format("L{:03d}.mla.attn_decode", 1 + i % 93);
    const std::uint64_t corr = i + 1;
    t.add(Event{EventKind::range, op, now, now + 5000, -1, -1, 4242, 0, 0, 0, "", -1});
    t.add(Event{EventKind::api, "cudaLaunchKernel", now + 100, now + 2300, -1, -1, 4242, corr, 0, 0, "", -1});
    t.add(Event{EventKind::kernel, "void mla_decode_split_kv<__nv_bfloat16, 64, 512>(Params)", now + 2500, now + 9700,
                0, static_cast<std::int32_t>(7 + i % 8), -1, corr, 0, 0, op, static_cast<std::int64_t>(i / 93)});
    now += 3001;
  }
  t.sort();
  return t;
}

void BM_TraceToJson(benchmark::State& state) {
  const auto t = make_trace(static_cast<std::size_t>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string json = k3::profiler::to_chrome_json(t);
    bytes = json.size();
    benchmark::DoNotOptimize(json.data());
  }
  state.counters["json_bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_TraceToJson)->Arg(1'000'000)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_TraceToJsonGz(benchmark::State& state) {
  const auto t = make_trace(1'000'000);
  const int level = static_cast<int>(state.range(0));
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string gz = k3::profiler::gzip_compress(k3::profiler::to_chrome_json(t), level);
    bytes = gz.size();
    benchmark::DoNotOptimize(gz.data());
  }
  state.counters["gz_bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations() * 1'000'000);
}
BENCHMARK(BM_TraceToJsonGz)->Arg(1)->Arg(-1)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_TraceFromJson(benchmark::State& state) {
  const std::string json = k3::profiler::to_chrome_json(k3::bench::engine_like_trace(1'000'000));
  for (auto _ : state) {
    const k3::profiler::Trace t = k3::profiler::parse_chrome_json(json, "engine_like.json");
    benchmark::DoNotOptimize(t.size());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(json.size()));
  state.SetItemsProcessed(state.iterations() * 1'000'000);
}
BENCHMARK(BM_TraceFromJson)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ReadTraceJsonGz(benchmark::State& state) {
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("k3perf_trace_bench_{}.json.gz", getpid())).string();
  k3::profiler::write_chrome_trace(k3::bench::engine_like_trace(1'000'000), path, 1);
  for (auto _ : state) {
    const k3::profiler::Trace t = k3::profiler::read_trace(path);
    benchmark::DoNotOptimize(t.size());
  }
  state.counters["gz_bytes"] = static_cast<double>(std::filesystem::file_size(path));
  state.SetItemsProcessed(state.iterations() * 1'000'000);
  std::filesystem::remove(path);
}
BENCHMARK(BM_ReadTraceJsonGz)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
