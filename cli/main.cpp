// k3perf: predict, run and measure the performance of Kimi K3 and its family.
#include "cli/commands.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/version.h"

#include <fmt/core.h>

#include <filesystem>

namespace {

// Options whose default is an empty list or a "not given" sentinel show none in --help.
void drop_empty_defaults(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_default_str() == "[]") o->default_str("");
  }
  for (CLI::App* sub : app.get_subcommands({})) drop_empty_defaults(*sub);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"k3perf: performance of Kimi K3 (Kimi Delta Attention + gated MLA, LatentMoE) and its family"};
  app.set_version_flag("--version", std::string("k3perf ") + k3::k3perf_version());
  app.option_defaults()->always_capture_default();  // --help shows each option's default; verbs inherit it
  k3::cli::GlobalOptions global;
  app.add_option("--data-dir", global.data_dir,
                 "the scenarios/ folder with models/, hardware/ and claims/ (default: $K3PERF_DATA_DIR, else the "
                 "source tree's)");
  app.require_subcommand(0, 1);
  app.footer(
      "Without a verb: the prediction of the embedded default scenario. `k3perf VERB --help`: a verb's options, a "
      "worked example and its exit statuses (0 done, 2 a usage error or bad input, 3 an internal error, and the "
      "verb's own).");
  k3::cli::add_predict_command(app, global);
  k3::cli::add_verify_command(app, global);
  k3::cli::add_make_checkpoint_command(app);
  k3::cli::add_inspect_command(app);
  k3::cli::add_generate_command(app);
  k3::cli::add_run_command(app, global);
#ifdef K3PERF_HAVE_CUDA
  k3::cli::add_profile_command(app);
#endif
  k3::cli::add_serve_command(app, global);
  k3::cli::add_plan_command(app, global);
  k3::cli::add_cache_command(app, global);
  k3::cli::add_spec_command(app, global);
  k3::cli::add_breakeven_command(app, global);
  k3::cli::add_comm_command(app, global);
  k3::cli::add_compare_command(app, global);
  k3::cli::add_calibrate_command(app, global);
  k3::cli::add_gui_command(app, global);
  drop_empty_defaults(app);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) return k3::cli::run_default(global);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0, a verb's own status (CLI::RuntimeError) stands; every usage error exits 2, as
    // bad input does (CLI11's own codes differ per error).
    const int status = app.exit(e);
    if (dynamic_cast<const CLI::RuntimeError*>(&e)) return status;
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      if (const std::string hint = k3::cli::did_you_mean(app); !hint.empty()) fmt::print(stderr, "{}\n", hint);
    }
    return status == 0 ? 0 : 2;
  } catch (const k3::cli::ExitStatus& e) {
    fmt::print(stderr, "k3perf: {}\n", e.what());
    return e.status();
  } catch (const k3::InputError& e) {
    fmt::print(stderr, "k3perf: error: {}\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that the system refuses (too long, a loop of links): about the input, not the program.
    fmt::print(stderr, "k3perf: error: {}: {}\n", k3::quoted_excerpt(e.path1().string()), e.code().message());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "k3perf: internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
