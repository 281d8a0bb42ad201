// Wall time and peak memory of reading one trace file, each read in a fresh process so that the peak
// (VmHWM, Linux) is the reader's own. The target (issue 26): 1 M kernel events from .json.gz in at most
// 2 s and 300 MB.
//   k3perf_bench_trace_read write DIR [--kernels N]   DIR/engine_<N>.json.gz (gzip level 1) and .json
//   k3perf_bench_trace_read read FILE                  one line: events, wall time, peak resident memory
#include "bench/engine_trace.h"
#include "profiler/trace/chrome_json.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

// The process's peak resident set size in bytes (VmHWM of /proc/self/status).
double peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  }
  return -1.0;
}

// User plus system CPU time of the process so far, in seconds (all threads).
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Wall time and peak memory of reading a trace"};
  app.require_subcommand(1);
  std::string dir, file;
  std::size_t kernels = 1'000'000;
  CLI::App* write = app.add_subcommand("write", "write the synthetic engine-like trace as .json.gz and .json");
  write->add_option("dir", dir, "output folder")->required();
  write->add_option("--kernels", kernels, "kernel events");
  CLI::App* read = app.add_subcommand("read", "read one trace file");
  read->add_option("file", file, "a .json or .json.gz trace")->required()->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);

  if (*write) {
    const k3::profiler::Trace t = k3::bench::engine_like_trace(kernels);
    std::filesystem::create_directories(dir);
    for (const char* ext : {".json.gz", ".json"}) {
      const std::string path = fmt::format("{}/engine_{}{}", dir, kernels, ext);
      k3::profiler::write_chrome_trace(t, path, 1);
      fmt::print("wrote {} ({} bytes)\n", path, std::filesystem::file_size(path));
    }
    return 0;
  }
  const double cpu_start_s = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  const k3::profiler::Trace t = k3::profiler::read_trace(file);
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
  fmt::print("file={} file_bytes={} events={} names={} read_s={:.3f} cpu_s={:.3f} peak_rss_mb={:.1f}\n",
             std::filesystem::path(file).filename().string(), std::filesystem::file_size(file), t.size(),
             t.names().size(), wall.count(), cpu_seconds() - cpu_start_s, peak_resident_bytes() / 1e6);
  return 0;
}
