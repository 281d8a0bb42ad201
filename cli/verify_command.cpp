#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/scenario.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_markdown.h"
#include "sim/claims/claim_report.h"

#include <fmt/core.h>

#include <algorithm>

namespace k3::cli {

namespace {
struct VerifyOptions {
  std::string json_path;
  std::string markdown_path;
  std::vector<std::string> only;
};
}  // namespace

void add_verify_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand("verify", "Check the published claims in scenarios/claims/ against predictions");
  cmd->add_option("--json", opts->json_path, "write every claim's verdict and breakdown as JSON");
  cmd->add_option("--markdown", opts->markdown_path, "write the report as Markdown (docs/claims.md is this)");
  cmd->add_option("--claim", opts->only, "check only these claim ids (repeatable), e.g. --claim P5")
      ->allow_extra_args(false);
  cmd->callback([opts, &global] {
    const DataPaths data = DataPaths::resolve(global.data_dir);
    std::vector<ClaimResult> results;
    for (const Claim& c : load_claims(data.claims_dir)) {
      if (!opts->only.empty() && std::find(opts->only.begin(), opts->only.end(), c.id) == opts->only.end()) continue;
      results.push_back(check_claim(c, data));
    }
    if (results.empty()) throw InputError("verify: no claim matched --claim");
    fmt::print("{}", format_claim_results(results));
    if (!opts->json_path.empty()) {
      write_file_atomically(opts->json_path, to_json(results).dump(2) + "\n");
      fmt::print(stderr, "wrote {}\n", opts->json_path);
    }
    if (!opts->markdown_path.empty()) {
      write_file_atomically(opts->markdown_path, format_claims_markdown(results));
      fmt::print(stderr, "wrote {}\n", opts->markdown_path);
    }
  });
}

}  // namespace k3::cli
