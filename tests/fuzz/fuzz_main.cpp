// The entry points libFuzzer calls: LLVMFuzzerInitialize picks the target by the program's name (fuzz_<target>)
// or $K3PERF_FUZZ_TARGET, LLVMFuzzerTestOneInput runs it. Forked workers (-fork, -jobs) inherit both.
#include "core/error.h"
#include "fuzz_target.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace k3::fuzz {
namespace {

std::map<std::string, Entry>& targets() {
  static std::map<std::string, Entry> all;
  return all;
}

Entry selected = nullptr;

}  // namespace

int register_target(const char* name, Entry entry) {
  targets().emplace(name, entry);
  return 0;
}

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors may have.
  static const std::string& dir = *new std::string([] {
    const char* tmp = std::getenv("TMPDIR");
    const std::filesystem::path path =
        std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("k3perf_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path.string();
  }());
  static const int removed_at_exit = std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
  });
  (void)removed_at_exit;
  return dir;
}

std::string write_scratch(const std::string& name, std::span<const uint8_t> data) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path;
}

}  // namespace k3::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  using k3::fuzz::targets;
  std::string name;
  if (const char* env = std::getenv("K3PERF_FUZZ_TARGET")) name = env;
  if (name.empty() && *argc > 0) {
    const std::string program = std::filesystem::path((*argv)[0]).filename().string();
    if (program.rfind("fuzz_", 0) == 0) name = program.substr(5);
  }
  if (name == "list") {  // K3PERF_FUZZ_TARGET=list: the names, one a line
    for (const auto& [target, entry] : targets()) std::printf("%s\n", target.c_str());
    std::exit(0);
  }
  const auto it = targets().find(name);
  if (it == targets().end()) {
    std::fprintf(stderr, "k3perf_fuzz: %s; run it as fuzz_<target> or with K3PERF_FUZZ_TARGET=<target>, one of:\n",
                 name.empty() ? "no target named" : ("unknown target '" + name + "'").c_str());
    for (const auto& [target, entry] : targets()) std::fprintf(stderr, "  %s\n", target.c_str());
    std::exit(2);
  }
  k3::fuzz::selected = it->second;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    k3::fuzz::selected(std::span<const uint8_t>(data, size));
  } catch (const k3::InputError&) {
  }
  return 0;
}
