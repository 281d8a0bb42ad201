// `k3perf gui [files…]`: starts the desktop GUI (gui/app, k3perf-gui) in place of this process, with the
// same files and --data-dir. The GUI is its own program so that the CLI never links Qt Widgets.
#include "cli/commands.h"
#include "core/error.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace k3::cli {
namespace {

namespace fs = std::filesystem;

struct GuiOptions {
  std::vector<std::string> files;
  std::string screenshot_dir;
};

// k3perf-gui beside this binary (an install) or where the build tree puts it (build/<preset>/gui/app).
std::string find_gui() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate :
         {self.parent_path() / "k3perf-gui", self.parent_path() / "../gui/app/k3perf-gui"}) {
      if (fs::is_regular_file(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
    }
  }
  return "k3perf-gui";  // PATH
}

}  // namespace

void add_gui_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<GuiOptions>();
  CLI::App* cmd = app.add_subcommand("gui", "the desktop GUI: what-if, breakdown, roofline, timeline, compare");
  set_help_footer(*cmd,
                  "k3perf gui bench/results/2026-12-01-h200-engine-traces-9  # --screenshot DIR: every view as a PNG");
  cmd->add_option("files", o->files, "scenario YAML, prediction JSON, trace, compare JSON or a folder of them");
  cmd->add_option("--screenshot", o->screenshot_dir, "render every view to DIR/<view>.png and exit");
  cmd->callback([o, &global] {
    const std::string gui = find_gui();
    std::vector<std::string> args = {gui};
    if (!global.data_dir.empty()) args.insert(args.end(), {"--data-dir", global.data_dir});
    if (!o->screenshot_dir.empty()) args.insert(args.end(), {"--screenshot", o->screenshot_dir});
    args.insert(args.end(), o->files.begin(), o->files.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    throw InputError(
        fmt::format("cannot start {}: {} (the GUI is built when Qt 6 is found: Debian qt6-base-dev, "
                    "qt6-svg-dev; then `cmake --build` builds gui/app/k3perf-gui)",
                    gui, std::strerror(errno)));
  });
}

}  // namespace k3::cli
