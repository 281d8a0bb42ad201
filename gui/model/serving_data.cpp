#include "gui/model/serving_data.h"

#include "core/error.h"
#include "sim/cache/prefix_cache.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/trace_workload.h"
#include "sim/workload/mooncake_reader.h"

#include <fmt/format.h>

#include <QStringList>
#include <QThread>

#include <filesystem>

namespace k3::gui {

namespace {

namespace fs = std::filesystem;

// Thrown by a worker asked to stop.
struct Stopped {};

}  // namespace

ServingFiles ServingFiles::defaults(const DataPaths& data) {
  // The data folder is the repository's scenarios/ (as prefix_cache_hit's chat trace assumes).
  const fs::path scenarios = fs::path(data.models_dir).parent_path();
  return {(scenarios.parent_path() / "data/traces/conversation_trace.jsonl").string(),
          (scenarios / "breakeven/k3-h200x16-chat.yaml").string(),
          (scenarios / "serving/k3-h200x16-chat.yaml").string()};
}

CacheCurve compute_cache_curve(const ServingFiles& files, const DataPaths& data, const std::vector<std::string>& sets) {
  const Scenario deployment = load_breakeven_spec(files.breakeven, data, sets).deployment;
  cache::CacheConfig config;  // the verb's defaults: unbounded HBM, sparse checkpoints, LRU, one node
  cache::validate(config);
  const cache::CacheSizes sizes = cache::cache_sizes(deployment.model, deployment.precision);
  const std::vector<workload::Request> requests = workload::read_mooncake_trace(files.trace);
  const std::vector<double> capacities_tokens{1e4, 1e5, 1e6, 1e7, 1e8, 1e9};  // as `k3perf cache --curve`
  return {fs::path(files.trace).filename().string(), config.tiers[0].name, deployment.model.name,
          cache::hit_rate_curve(requests, config, sizes, capacities_tokens)};
}

BreakevenResult compute_breakeven(const ServingFiles& files, const DataPaths& data,
                                  const std::vector<std::string>& sets) {
  return solve_breakeven(load_breakeven_spec(files.breakeven, data, sets));
}

plan::PlanResult compute_plan(const ServingFiles& files, const DataPaths& data, const std::vector<std::string>& sets,
                              const std::function<void(std::size_t, std::size_t)>& progress) {
  const serving::ServingScenario s = serving::load_serving_scenario(files.plan, data, sets);
  if (!s.plan) throw InputError(fmt::format("{}: no 'plan:' section (see docs/plan.md)", files.plan));
  const plan::PlanSpace space = plan::read_plan_space(*s.plan, s);
  std::optional<serving::TraceWorkload> trace;
  const serving::Workload w = serving::serving_workload(s, &trace);
  const double rate_per_s = trace ? serving::mean_rate_per_s(w.requests) : s.requests.rate_per_s;
  const plan::Prices prices = plan::load_prices(data.prices_dir + "/gpu-prices.yaml");
  return plan::run_plan(s, space, w, rate_per_s, prices, data, progress);
}

std::vector<ClaimResult> compute_claims(const DataPaths& data, const std::function<bool()>& keep_going) {
  std::vector<ClaimResult> results;
  for (const Claim& c : load_claims(data.claims_dir)) {
    if (keep_going && !keep_going()) throw Stopped{};
    results.push_back(check_claim(c, data));
  }
  return results;
}

// --- ClaimsTableModel --------------------------------------------------------------------------------------

void ClaimsTableModel::set_results(std::vector<ClaimResult> results) {
  beginResetModel();
  results_ = std::move(results);
  endResetModel();
}

QString ClaimsTableModel::breakdown(int row) const {
  const ClaimResult& r = results_.at(std::size_t(row));
  QString text = QString::fromStdString(r.claim.id + "  " + r.claim.title + "\nsource: " + r.claim.source + "\n");
  for (const std::string& line : r.evaluation.breakdown) text += QString::fromStdString(line) + "\n";
  for (const ComparedValue& v : r.values) {
    if (v.measured) text += QString::fromStdString("measured " + v.reported.key + ": " + v.measured->describe() + "\n");
  }
  if (const Alternative* alt = r.explained_by()) {
    text += QString::fromStdString("why: reproduced " + alt->assumption + "\n");
  } else if (r.verdict == Verdict::contradicted) {
    const AlternativeMatch* near = r.closest();
    text += QString::fromStdString(fmt::format(
        "why: no alternative reproduces it ({} tried){}\n", r.evaluation.alternatives.size(),
        near ? fmt::format("; closest: {}, {} of {} figures",
                           r.evaluation.alternatives[std::size_t(near->index)].assumption, near->within, near->of)
             : std::string()));
  }
  return text;
}

int ClaimsTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(results_.size()); }

int ClaimsTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant ClaimsTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(results_.size())) return {};
  const ClaimResult& r = results_[std::size_t(index.row())];
  if (role == Qt::ToolTipRole) return breakdown(index.row());
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case id: return QString::fromStdString(r.claim.id);
    case verdict: return QString::fromStdString(to_string(r.verdict));
    case predicted_vs_reported: {
      // One line per reported figure, as verify prints it: "key: predicted vs reported".
      QStringList lines;
      for (const ComparedValue& v : r.values) {
        lines << QString::fromStdString(fmt::format(
            "{}: {} vs {}{}{}", v.reported.key, v.predicted ? fmt::format("{:.4g}", *v.predicted) : std::string("-"),
            v.reported.describe(), v.predicted && !v.within ? "  (outside)" : "",
            v.measured ? fmt::format("; measured {:.4g}", v.measured->value) : ""));
      }
      return lines.join('\n');
    }
    case claim: return QString::fromStdString(r.claim.title);
    default: return {};
  }
}

QVariant ClaimsTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case id: return QStringLiteral("claim");
    case verdict: return QStringLiteral("verdict");
    case predicted_vs_reported: return QStringLiteral("predicted vs reported");
    case claim: return QStringLiteral("as reported");
    default: return {};
  }
}

// --- ServingData -------------------------------------------------------------------------------------------

struct ServingData::Outcome {
  std::optional<CacheCurve> cache_curve;
  std::optional<BreakevenResult> breakeven;
  std::optional<plan::PlanResult> plan;
  std::optional<std::vector<ClaimResult>> claims;
  std::string error;
  bool stopped = false;
};

ServingData::ServingData(DataPaths data, ServingFiles files, QObject* parent)
    : QObject(parent), data_(std::move(data)), files_(std::move(files)) {}

ServingData::~ServingData() {
  stop_->store(true);
  for (Job& job : jobs_) {
    if (!job.thread) continue;
    job.thread->wait();
    delete job.thread;
  }
}

bool ServingData::busy() const {
  for (const Job& job : jobs_) {
    if (job.thread) return true;
  }
  return false;
}

bool ServingData::running(ServingPart part) const { return jobs_[std::size_t(part)].thread != nullptr; }

std::string ServingData::cache_key(const std::vector<std::string>& sets) const {
  try {
    const Scenario d = load_breakeven_spec(files_.breakeven, data_, sets).deployment;
    return d.model.name + "/" + to_string(d.precision.kv_cache) + "/" + to_string(d.precision.kda_state);
  } catch (const Error&) {
    return "";  // the break-even's own computation reports why
  }
}

void ServingData::set_edits(const std::vector<std::string>& sets) {
  if (sets == sets_) return;
  sets_ = sets;
  const std::string key = cache_key(sets_);
  compute(ServingPart::breakeven);
  if (key.empty() || key != cache_key_) compute(ServingPart::cache_curve);
}

void ServingData::compute(ServingPart part) {
  Job& job = jobs_[std::size_t(part)];
  if (job.thread) {
    job.again = true;
    return;
  }
  if (part == ServingPart::cache_curve) cache_key_ = cache_key(sets_);
  auto outcome = std::make_shared<Outcome>();
  const std::shared_ptr<std::atomic<bool>> stop = stop_;
  const DataPaths data = data_;
  const ServingFiles files = files_;
  const std::vector<std::string> sets = sets_;
  job.thread = QThread::create([this, part, outcome, stop, data, files, sets] {
    try {
      switch (part) {
        case ServingPart::cache_curve: outcome->cache_curve = compute_cache_curve(files, data, sets); break;
        case ServingPart::breakeven: outcome->breakeven = compute_breakeven(files, data, sets); break;
        case ServingPart::plan:
          outcome->plan = compute_plan(files, data, sets, [this, stop](std::size_t done, std::size_t total) {
            if (stop->load()) throw Stopped{};
            if (done * 100 / total != (done - 1) * 100 / total || done == total) {  // one signal per percent
              QMetaObject::invokeMethod(
                  this, [this, done, total] { emit plan_progress(int(done), int(total)); }, Qt::QueuedConnection);
            }
          });
          break;
        case ServingPart::claims: outcome->claims = compute_claims(data, [stop] { return !stop->load(); }); break;
      }
    } catch (const Stopped&) {
      outcome->stopped = true;
    } catch (const std::exception& e) {
      outcome->error = e.what();
    }
  });
  connect(job.thread, &QThread::finished, this, [this, part, outcome] { finish(part, *outcome); });
  job.thread->start();
}

void ServingData::finish(ServingPart part, const Outcome& outcome) {
  Job& job = jobs_[std::size_t(part)];
  job.thread->wait();
  job.thread->deleteLater();
  job.thread = nullptr;
  if (!outcome.stopped) {
    errors_[std::size_t(part)] = outcome.error;
    if (outcome.error.empty()) {
      switch (part) {
        case ServingPart::cache_curve: cache_curve_ = outcome.cache_curve; break;
        case ServingPart::breakeven: breakeven_ = outcome.breakeven; break;
        case ServingPart::plan: plan_ = outcome.plan; break;
        case ServingPart::claims: claims_.set_results(*outcome.claims); break;
      }
    }
    emit changed(part);
  }
  if (job.again) {
    job.again = false;
    compute(part);
  }
  if (!busy()) emit idle();
}

}  // namespace k3::gui
