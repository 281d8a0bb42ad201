// `k3perf comm`: measured collective curves (docs/comm.md). `fit` turns an nccl-tests-style table
// into a hardware file with a `collectives` block, `check` compares a hardware file's model with a
// table, `curve` prints a hardware file's predicted times over message sizes.
#include "cli/commands.h"
#include "core/error.h"
#include "core/hardware_writer.h"
#include "core/scenario.h"
#include "sim/collective_time.h"
#include "sim/comm/collective_fit.h"
#include "sim/comm/nccl_table.h"

#include <fmt/core.h>

#include <cmath>
#include <set>

namespace k3::cli {

namespace {

struct CommOptions {
  std::string table;
  std::string base = "h200-sxm";
  std::string name;
  std::string source_id = "k3perf-nccl-sweep";
  std::string citation;
  std::string out;
  double target_error = 0.05;
  std::string hardware;
  std::string collective = "all_reduce";
  int group = 8;
};

}  // namespace

void add_comm_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<CommOptions>();
  CLI::App* cmd = app.add_subcommand("comm", "Collective curves: fit measured NCCL tables, check and print them");
  set_help_footer(*cmd, "k3perf comm curve --hardware h200-sxm --collective all_reduce --group 8");
  cmd->require_subcommand(1);

  CLI::App* fit = cmd->add_subcommand("fit", "Fit a table (bench/nccl_sweep CSV) into a hardware file");
  fit->add_option("table", o->table, "CSV: collective,group_size,size_bytes,time_us")->required();
  fit->add_option("--base", o->base, "hardware the table was measured on (name or path)");
  fit->add_option("--name", o->name, "name of the new hardware entry")->required();
  fit->add_option("--source-id", o->source_id, "source id for the measurement (kebab-case)");
  fit->add_option("--citation", o->citation, "provenance: date, GPUs, driver, NCCL version, commit, command")
      ->required();
  fit->add_option("--out", o->out, "the hardware YAML to write")->required();
  fit->add_option("--target-error", o->target_error, "largest relative error the fit may leave")
      ->check(CLI::Range(0.001, 0.15));
  fit->callback([o, &global] {
    const DataPaths data = DataPaths::resolve(global.data_dir);
    const Hardware base = load_hardware_by_name(o->base, data.hardware_dir);
    const std::vector<NcclSample> table = load_nccl_table(o->table);
    const std::vector<MeasuredCollective> curves = fit_table(table, base, o->target_error);
    for (const MeasuredCollective& c : curves) {
      fmt::print("{:<15} {} GPUs over {}: latency {:.2f} us, {} knots, worst error {:.1f}%\n", c.collective,
                 c.group_size, c.link, c.latency_us, c.knot_sizes_bytes.size(),
                 100 * max_relative_error(c, select_samples(table, c.collective, c.group_size)));
    }
    write_hardware_file(o->out, measured_hardware_yaml(base.source_file, o->name, o->source_id, o->citation, curves));
    fmt::print(stderr, "wrote {}\n", o->out);
  });

  CLI::App* check = cmd->add_subcommand("check", "Compare a hardware file's collective model with a measured table");
  check->add_option("table", o->table, "CSV: collective,group_size,size_bytes,time_us")->required();
  check->add_option("--hardware", o->hardware, "hardware name or path")->required();
  check->callback([o, &global] {
    const Hardware hw = load_hardware_by_name(o->hardware, DataPaths::resolve(global.data_dir).hardware_dir);
    const std::vector<NcclSample> table = load_nccl_table(o->table);
    double worst = 0;
    fmt::print("{:<15} {:>5} {:>14} {:>12} {:>12} {:>8}\n", "collective", "gpus", "size bytes", "measured us",
               "predicted us", "error");
    for (const NcclSample& s : table) {
      const double p = collective_call_time_us(hw, s.collective, s.group_size, s.size_bytes);
      worst = std::max(worst, std::fabs(p / s.time_us - 1));
      fmt::print("{:<15} {:>5} {:>14.0f} {:>12.2f} {:>12.2f} {:>7.1f}%\n", s.collective, s.group_size, s.size_bytes,
                 s.time_us, p, 100 * (p / s.time_us - 1));
    }
    fmt::print("worst error {:.1f}% over {} samples ({} within 15%)\n", 100 * worst, table.size(),
               worst <= 0.15 ? "all" : "NOT all");
  });

  CLI::App* curve = cmd->add_subcommand("curve", "Predicted time and bus bandwidth of a collective, 4 KB to 1 GB");
  curve->add_option("--hardware", o->hardware, "hardware name or path")->required();
  curve->add_option("--collective", o->collective, "all_reduce, all_gather, reduce_scatter or all_to_all");
  curve->add_option("--group", o->group, "GPUs in the group")->check(CLI::Range(2, 1 << 20));
  curve->callback([o, &global] {
    const Hardware hw = load_hardware_by_name(o->hardware, DataPaths::resolve(global.data_dir).hardware_dir);
    const double factor = nccl_bus_factor(o->collective, o->group);
    const CollectiveLatency l = collective_latency(hw, collective_kind(o->collective), o->group);
    fmt::print(
        "{} over {} GPUs of {} (model: {:.2f} us per call by {}, unless a measured curve covers the group)\n"
        "{:>14} {:>12} {:>12}\n",
        o->collective, o->group, hw.name, l.latency_us, to_string(l.algorithm), "size bytes", "time us", "busbw GB/s");
    for (double s = 4096; s <= double(1u << 30); s *= 4) {
      const double t = collective_call_time_us(hw, o->collective, o->group, s);
      fmt::print("{:>14.0f} {:>12.2f} {:>12.1f}\n", s, t, s * factor / (t * 1e-6) / 1e9);
    }
  });
}

}  // namespace k3::cli
