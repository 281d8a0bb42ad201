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
  std::vector<std::string> fail_on;  // verdicts that make the exit status 4
};

// "contradicted" -> Verdict::contradicted; "not_modelled" for the verdict printed "not modelled yet" (verdict_id).
Verdict verdict_named(const std::string& name) {
  for (Verdict v : {Verdict::reproduced, Verdict::explained, Verdict::contradicted, Verdict::not_modelled}) {
    if (name == verdict_id(v)) return v;
  }
  throw InputError(
      fmt::format("--fail-on '{}': expected one of reproduced, explained, contradicted, not_modelled", name));
}
}  // namespace

void add_verify_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand("verify", "Check the published claims in scenarios/claims/ against predictions");
  set_help_footer(
      *cmd, "k3perf verify --claim P16 --fail-on contradicted --json verify.json",
      {{"4", "a claim got a --fail-on verdict (after the report; the claims are named on standard error)"}});
  cmd->add_option("--json", opts->json_path, "write every claim's verdict and breakdown as JSON");
  cmd->add_option("--markdown", opts->markdown_path, "write the report as Markdown (docs/claims.md is this)");
  cmd->add_option("--claim", opts->only, "check only these claim ids (repeatable), e.g. --claim P5")
      ->allow_extra_args(false);
  cmd->add_option("--fail-on", opts->fail_on,
                  "exit with status 4 when a claim gets this verdict (repeatable: contradicted, not_modelled, "
                  "explained, reproduced), after the report; for CI")
      ->allow_extra_args(false);
  cmd->callback([opts, &global] {
    std::vector<Verdict> fail_on;
    for (const std::string& name : opts->fail_on) fail_on.push_back(verdict_named(name));
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
    std::vector<std::string> failed;
    for (const ClaimResult& r : results) {
      if (std::find(fail_on.begin(), fail_on.end(), r.verdict) != fail_on.end()) {
        failed.push_back(fmt::format("{} {}", r.claim.id, to_string(r.verdict)));
      }
    }
    if (!failed.empty()) {
      std::string list;
      for (const std::string& f : failed) list += (list.empty() ? "" : ", ") + f;
      throw ExitStatus(
          4, fmt::format("verify: {} of {} claims have a --fail-on verdict: {}", failed.size(), results.size(), list));
    }
  });
}

}  // namespace k3::cli
