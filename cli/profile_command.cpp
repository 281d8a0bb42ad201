// `k3perf profile -o trace.json.gz -- program [args]`: runs any CUDA program under the CUPTI collector
// (profiler/cupti/injection.cpp, loaded by CUDA through CUDA_INJECTION64_PATH) and writes its
// attributed trace; NVTX ranges in the program become the trace's op ranges.
#include "cli/commands.h"
#include "core/error.h"
#include "profiler/cupti/cupti_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

namespace k3::cli {

namespace {

// The injection library beside the k3perf binary (build tree: ../profiler, bundle: ../lib).
std::string injection_library() {
  namespace fs = std::filesystem;
  const fs::path self = fs::canonical("/proc/self/exe").parent_path();
  for (const fs::path& candidate : {self / "libk3perf_cupti_inject.so", self / "../lib/libk3perf_cupti_inject.so",
                                    self / "../profiler/libk3perf_cupti_inject.so"}) {
    if (fs::exists(candidate)) return fs::canonical(candidate).string();
  }
  throw Error(
      fmt::format("libk3perf_cupti_inject.so not found beside {} (in ., ../lib or ../profiler)", self.string()));
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto out = std::make_shared<std::string>("trace.json.gz");
  auto program = std::make_shared<std::vector<std::string>>();
  auto format = std::make_shared<std::string>("k3perf");
  CLI::App* cmd =
      app.add_subcommand("profile", "Trace any CUDA program with CUPTI: k3perf profile -o F -- program args");
  set_help_footer(*cmd, "k3perf profile -o trace.json.gz -- build/release/bench/gpu/k3perf_device_probe",
                  {{"N", "the program's own exit status when it is not 0 (128 + the signal that ended it)"}});
  cmd->add_option("-o,--output", *out, "the trace to write (.json or .json.gz)");
  cmd->add_option("--trace-format", *format,
                  "k3perf, or kineto: the categories, names and fields of PyTorch's profiler, for HTA")
      ->check(CLI::IsMember({"k3perf", "kineto"}))
      ->capture_default_str();
  cmd->add_option("program", *program, "the program and its arguments (after --)")->required();
  cmd->callback([out, program, format] {
    const std::string library = injection_library();
    const std::string cupti = profiler::enable_nvtx_injection();  // sets NVTX_INJECTION64_PATH for the child
    setenv("CUDA_INJECTION64_PATH", library.c_str(), 1);
    setenv("K3PERF_TRACE_OUT", std::filesystem::absolute(*out).c_str(), 1);
    setenv("K3PERF_TRACE_FORMAT", format->c_str(), 1);
    setenv("K3PERF_TRACE_COMMAND", fmt::format("{}", fmt::join(*program, " ")).c_str(), 1);
    if (cupti.empty()) fmt::print(stderr, "warning: libcupti's path not found: NVTX ranges will be missing\n");
    std::vector<char*> argv;
    for (std::string& a : *program) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t child = fork();
    if (child < 0) throw Error("fork failed");
    if (child == 0) {
      execvp(argv[0], argv.data());
      fmt::print(stderr, "k3perf profile: cannot run {}\n", (*program)[0]);
      _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!std::filesystem::exists(*out)) {
      fmt::print(stderr, "k3perf profile: no trace written: {} did not initialise CUDA\n", (*program)[0]);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      // The program's own status, as a shell would report it (128 + the signal that ended it).
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      throw ExitStatus(code, fmt::format("{} ended with status {}", (*program)[0], code));
    }
  });
}

}  // namespace k3::cli
