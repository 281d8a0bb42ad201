// The k3perf verbs. Each registers its options on a CLI11 subcommand and runs from them; all the
// work happens in the libraries (sim/, core/), the verbs only read arguments and write outputs.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace k3::cli {

struct GlobalOptions {
  std::string data_dir;  // --data-dir: the scenarios/ folder (models, hardware, claims)
};

// Thrown by a verb whose work succeeded but whose answer is a failure the caller asked to see in the exit status
// (predict --require-fit): main prints the message and returns the status.
class ExitStatus : public std::runtime_error {
 public:
  ExitStatus(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

void add_predict_command(CLI::App& app, const GlobalOptions& global);
void add_verify_command(CLI::App& app, const GlobalOptions& global);
void add_make_checkpoint_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_generate_command(CLI::App& app);
// The GPU engine (engine/session); in a build without CUDA it plans and predicts (--dry-run) and says "no GPU".
void add_run_command(CLI::App& app, const GlobalOptions& global);
// Only in builds with CUDA (K3PERF_HAVE_CUDA): any CUDA program under the CUPTI collector.
void add_profile_command(CLI::App& app);
void add_serve_command(CLI::App& app, const GlobalOptions& global);
void add_plan_command(CLI::App& app, const GlobalOptions& global);
void add_cache_command(CLI::App& app, const GlobalOptions& global);
void add_spec_command(CLI::App& app, const GlobalOptions& global);
void add_breakeven_command(CLI::App& app, const GlobalOptions& global);
void add_comm_command(CLI::App& app, const GlobalOptions& global);
// The profiler's host side: prediction against a measured trace, and calibration from measured runs.
void add_compare_command(CLI::App& app, const GlobalOptions& global);
void add_calibrate_command(CLI::App& app, const GlobalOptions& global);
// The desktop GUI (gui/app): replaces this process with k3perf-gui.
void add_gui_command(CLI::App& app, const GlobalOptions& global);
// The end of a verb's --help: one worked example (a command line run from the repository root; tests/cli runs each
// one) and the exit statuses: 0, 2 and 3 as every verb has them, and the verb's own ({"4", "with --require-fit:
// ..."}), which replace a common one of the same status.
struct ExitStatusLine {
  std::string status;  // "4", or "N" for a status that is not one number
  std::string meaning;
};
void set_help_footer(CLI::App& cmd, const std::string& example, std::vector<ExitStatusLine> statuses = {});
// After a parse error for an argument nobody takes: "'predikt': did you mean 'predict'?" (the verb, or the option
// of the verb reached, nearest by edit distance), or "" when nothing is near.
std::string did_you_mean(const CLI::App& app);
// `k3perf` with no verb: predict the embedded default scenario and print the summary.
int run_default(const GlobalOptions& global);

}  // namespace k3::cli
