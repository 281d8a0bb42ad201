#include "gui/views/profile_view.h"

#include "core/error.h"
#include "gui/model/document.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

namespace k3::gui {
namespace {

constexpr int kOutputLines = 20000;  // the output pane keeps the last lines of a long run

QString seconds_text(qint64 ms) { return QString("%1 s").arg(ms / 1000.0, 0, 'f', 1); }

// A line edit with a Browse… button beside it.
QWidget* with_browse(QLineEdit* edit, const std::function<void()>& browse, QWidget* parent) {
  auto* row = new QWidget(parent);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit, 1);
  auto* button = new QPushButton("Browse…", row);
  QObject::connect(button, &QPushButton::clicked, row, browse);
  layout->addWidget(button);
  return row;
}

}  // namespace

ProfileView::ProfileView(Document* document, QWidget* parent)
    : ProfileView(document, detect_gpu(GpuProbe::system()), find_k3perf(QCoreApplication::applicationDirPath()),
                  parent) {}

ProfileView::ProfileView(Document* document, GpuCheck gpu, K3perfBinary k3perf, QWidget* parent)
    : QWidget(parent), document_(document), gpu_(std::move(gpu)), k3perf_(std::move(k3perf)) {
  job_ = new ProfileJob(this);
  auto* layout = new QVBoxLayout(this);

  gpu_label_ = new QLabel(this);
  gpu_label_->setTextFormat(Qt::PlainText);
  gpu_label_->setWordWrap(true);
  binary_label_ = new QLabel(this);
  binary_label_->setTextFormat(Qt::PlainText);
  binary_label_->setWordWrap(true);
  binary_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  gpu_label_->setText(gpu_.found ? "GPU: " + gpu_.text
                                 : gpu_.text +
                                       ". Profiling runs on this machine's NVIDIA GPU; traces recorded "
                                       "elsewhere open with File → Open.");
  binary_label_->setText(k3perf_.path.isEmpty() ? "k3perf " + k3perf_.how
                                                : QString("k3perf: %1 (%2)").arg(k3perf_.path, k3perf_.how));
  if (!gpu_.found || k3perf_.path.isEmpty()) {
    QFont bold = gpu_label_->font();
    bold.setBold(true);
    (gpu_.found ? binary_label_ : gpu_label_)->setFont(bold);
  }
  layout->addWidget(gpu_label_);
  layout->addWidget(binary_label_);

  // The engine.
  auto* run_box = new QGroupBox("Run the engine and trace its decode steps: k3perf run … --trace", this);
  auto* run_form = new QFormLayout(run_box);
  scenario_ = new QLineEdit(run_box);
  scenario_->setPlaceholderText("a single-GPU scenario YAML; empty: the model below at k3perf run's default shapes");
  scenario_origin_ = QString::fromStdString(document_->scenario_origin());
  if (QFileInfo(scenario_origin_).isFile()) scenario_->setText(scenario_origin_);
  run_form->addRow("Scenario", with_browse(
                                   scenario_,
                                   [this] {
                                     const QString path = QFileDialog::getOpenFileName(
                                         this, "Scenario to run", scenario_->text(), "Scenarios (*.yaml *.yml)");
                                     if (!path.isEmpty()) scenario_->setText(path);
                                   },
                                   run_box));
  model_ = new QLineEdit("kimi-k3", run_box);
  model_->setToolTip("without a scenario: a model name in the data folder, or a config.json");
  run_form->addRow("Model", model_);
  weights_ = new QLineEdit("random:7", run_box);
  weights_->setToolTip("a checkpoint directory, or random[:seed] (generated on the GPU)");
  run_form->addRow("Weights", weights_);
  layers_ = new QSpinBox(run_box);
  layers_->setRange(0, 1000);
  layers_->setValue(4);
  layers_->setSpecialValueText("all");
  layers_->setToolTip("keep only the first N layers (one GPU holds K3's first 4 at real width)");
  layers_->setMaximumWidth(layers_->fontMetrics().horizontalAdvance("0000000") + 40);
  run_form->addRow("Layers", layers_);
  with_edits_ = new QCheckBox(run_box);
  run_form->addRow("What-if edits", with_edits_);
  run_button_ = new QPushButton("Run and trace", run_box);
  run_form->addRow(run_button_);
  layout->addWidget(run_box);

  // Any CUDA program.
  auto* profile_box = new QGroupBox("Trace any CUDA program: k3perf profile -o … -- program", this);
  auto* profile_form = new QFormLayout(profile_box);
  program_ = new QLineEdit(profile_box);
  program_->setPlaceholderText("program and arguments, e.g. ./my_cuda_app --steps 10");
  profile_form->addRow("Program", program_);
  profile_button_ = new QPushButton("Profile", profile_box);
  profile_form->addRow(profile_button_);
  layout->addWidget(profile_box);

  auto* out_form = new QFormLayout;
  out_dir_ = new QLineEdit(QDir::temp().filePath("k3perf-gui-runs"), this);
  out_form->addRow("Output folder", with_browse(
                                        out_dir_,
                                        [this] {
                                          const QString dir = QFileDialog::getExistingDirectory(
                                              this, "Folder for the traces", out_dir_->text());
                                          if (!dir.isEmpty()) out_dir_->setText(dir);
                                        },
                                        this));
  layout->addLayout(out_form);

  // The job.
  command_ = new QLabel(this);
  command_->setTextFormat(Qt::PlainText);
  command_->setWordWrap(true);
  command_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(command_);
  auto* progress_row = new QHBoxLayout;
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(false);
  progress_row->addWidget(progress_, 1);
  cancel_button_ = new QPushButton("Cancel", this);
  progress_row->addWidget(cancel_button_);
  layout->addLayout(progress_row);
  status_ = new QLabel(this);
  status_->setTextFormat(Qt::PlainText);
  status_->setWordWrap(true);
  layout->addWidget(status_);
  output_ = new QPlainTextEdit(this);
  output_->setReadOnly(true);
  output_->setMaximumBlockCount(kOutputLines);
  output_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  output_->setPlaceholderText("the command's output appears here");
  layout->addWidget(output_, 1);

  ticker_ = new QTimer(this);
  ticker_->setInterval(250);
  connect(ticker_, &QTimer::timeout, this, &ProfileView::update_progress);
  connect(run_button_, &QPushButton::clicked, this, [this] { start(run_job(run_request())); });
  connect(profile_button_, &QPushButton::clicked, this, [this] {
    const QStringList program = QProcess::splitCommand(program_->text());
    if (program.isEmpty()) {
      status_->setText("Profile needs a program to run.");
      return;
    }
    start(profile_job(program, out_dir_->text(), QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss")));
  });
  connect(cancel_button_, &QPushButton::clicked, job_, [this] { job_->cancel(); });
  connect(job_, &ProfileJob::output_line, output_, &QPlainTextEdit::appendPlainText);
  connect(job_, &ProfileJob::progress_changed, this, &ProfileView::update_progress);
  connect(job_, &ProfileJob::finished, this, &ProfileView::on_finished);
  connect(program_, &QLineEdit::textChanged, this, &ProfileView::update_controls);
  connect(document_, &Document::prediction_changed, this, &ProfileView::update_controls);
  // A scenario opened later becomes the one to run (a prediction file has no scenario: the field stays).
  connect(document_, &Document::prediction_changed, this, [this] {
    const QString now = QString::fromStdString(document_->scenario_origin());
    if (now != scenario_origin_ && QFileInfo(now).isFile()) scenario_->setText(now);
    scenario_origin_ = now;
  });
  update_controls();
  status_->setText(gpu_.found && !k3perf_.path.isEmpty() ? "Ready." : "Profiling is not available here.");
}

QString ProfileView::machine_text() const { return gpu_label_->text() + "\n" + binary_label_->text(); }
QString ProfileView::status_text() const { return status_->text(); }
QString ProfileView::output_text() const { return output_->toPlainText(); }

RunRequest ProfileView::run_request() const {
  RunRequest r;
  r.scenario = scenario_->text().trimmed();
  r.model = model_->text().trimmed();
  r.weights = weights_->text().trimmed();
  r.layers = layers_->value();
  if (with_edits_->isChecked()) {
    for (const auto& [key, value] : document_->edits()) r.sets << QString::fromStdString(key + "=" + value);
  }
  r.out_dir = out_dir_->text();
  r.stamp = QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss");
  return r;
}

void ProfileView::start(const JobSpec& spec) {
  if (!QDir().mkpath(out_dir_->text())) {
    status_->setText(QString("Cannot create the output folder %1").arg(out_dir_->text()));
    return;
  }
  spec_ = spec;
  output_->clear();
  job_->start(k3perf_.path, spec.arguments);
  command_->setText("$ " + job_->command_line());
  progress_->setRange(0, 0);  // busy until a progress line gives a count
  ticker_->start();
  update_controls();
  update_progress();
}

void ProfileView::update_progress() {
  const std::optional<JobProgress>& p = job_->progress();
  if (job_->running()) {
    if (p && p->fraction) {
      progress_->setRange(0, 1000);
      progress_->setValue(static_cast<int>(*p->fraction * 1000));
    } else if (progress_->maximum() != 0) {
      progress_->setRange(0, 0);
    }
  }
  QString text = QString("%1 · %2").arg(job_->status_text(), seconds_text(job_->elapsed_ms()));
  if (p) text += " · " + p->stage;
  if (!job_->last_line().isEmpty()) text += "\nlast line: " + job_->last_line();
  status_->setText(text);
}

void ProfileView::on_finished() {
  ticker_->stop();
  progress_->setRange(0, 1000);
  progress_->setValue(job_->state() == ProfileJob::State::succeeded ? 1000 : 0);
  update_controls();
  update_progress();
  if (job_->state() != ProfileJob::State::succeeded) return;
  // The run's own prediction first, so that the trace is compared with what it ran.
  QStringList opened;
  try {
    if (!spec_.prediction_path.isEmpty() && QFileInfo::exists(spec_.prediction_path)) {
      document_->open(spec_.prediction_path.toStdString());
      opened << spec_.prediction_path;
    }
    document_->open(spec_.trace_path.toStdString());
    opened << spec_.trace_path;
  } catch (const Error& e) {
    status_->setText(status_->text() + "\ncannot open the result: " + QString::fromUtf8(e.what()));
    return;
  }
  status_->setText(status_->text() + "\nopened " + opened.join(" and ") +
                   (document_->comparison() ? "; the Compare tab shows the comparison" : ""));
}

void ProfileView::update_controls() {
  const bool can_start = gpu_.found && !k3perf_.path.isEmpty() && !job_->running();
  run_button_->setEnabled(can_start);
  profile_button_->setEnabled(can_start && !program_->text().trimmed().isEmpty());
  cancel_button_->setEnabled(job_->running());
  const std::size_t edits = document_->edits().size();
  with_edits_->setText(edits == 0
                           ? QString("none to pass (the What-if panel's edits go as --set)")
                           : QString("pass the %1 what-if edit%2 as --set").arg(edits).arg(edits == 1 ? "" : "s"));
  with_edits_->setEnabled(edits > 0);
  with_edits_->setChecked(edits > 0);
  QString why;
  if (!gpu_.found) {
    why = gpu_.text;
  } else if (k3perf_.path.isEmpty()) {
    why = "k3perf " + k3perf_.how;
  }
  for (QPushButton* b : {run_button_, profile_button_}) b->setToolTip(why);
}

}  // namespace k3::gui
