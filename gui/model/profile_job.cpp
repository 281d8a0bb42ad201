#include "gui/model/profile_job.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTimer>

#include <unistd.h>
#include <csignal>

namespace k3::gui {

// --- Is there a GPU ---------------------------------------------------------------------------------------

GpuProbe GpuProbe::system() {
  GpuProbe p;
  p.exists = [](const QString& path) { return QFileInfo::exists(path); };
  p.find_program = [](const QString& program) { return QStandardPaths::findExecutable(program); };
  p.run = [](const QString& program, const QStringList& arguments, QString* output) {
    QProcess process;
    process.start(program, arguments);
    // nvidia-smi answers in well under a second; a hung driver must not hang the window for long.
    if (!process.waitForFinished(5000)) {
      process.kill();
      process.waitForFinished(1000);
      return -1;
    }
    if (output) *output = QString::fromLocal8Bit(process.readAllStandardOutput());
    return process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
  };
  return p;
}

GpuCheck detect_gpu(const GpuProbe& probe) {
  const QString device = "/dev/nvidia0";
  const bool device_exists = probe.exists(device);
  const QString smi = probe.find_program("nvidia-smi");
  QString smi_note = "nvidia-smi not found";
  if (!smi.isEmpty()) {
    QString output;
    const int status = probe.run(smi, {"-L"}, &output);
    const QString first = output.section('\n', 0, 0).trimmed();
    if (status == 0 && !first.isEmpty()) return {true, first};
    smi_note = status == 0 ? "nvidia-smi -L lists no GPU"
                           : QString("nvidia-smi -L exited with status %1%2")
                                 .arg(status)
                                 .arg(first.isEmpty() ? QString() : ": " + first);
  }
  if (device_exists) return {true, QString("%1 present (%2)").arg(device, smi_note)};
  return {false, QString("no NVIDIA GPU found: %1 absent and %2").arg(device, smi_note)};
}

// --- Which k3perf -------------------------------------------------------------------------------------------

K3perfBinary find_k3perf(const QString& app_dir, const QStringList& path_dirs) {
  const QDir dir(app_dir);
  for (const QString& relative : {QString("../../cli/k3perf"), QString("k3perf")}) {
    const QFileInfo candidate(dir.filePath(relative));
    if (candidate.isFile() && candidate.isExecutable()) return {candidate.canonicalFilePath(), "beside k3perf-gui"};
  }
  const QString on_path = QStandardPaths::findExecutable("k3perf", path_dirs);
  if (!on_path.isEmpty()) return {on_path, "on PATH"};
  return {QString(),
          QString("not found: neither %1 nor %2 exists, and k3perf is not on PATH")
              .arg(QDir::cleanPath(dir.filePath("../../cli/k3perf")), QDir::cleanPath(dir.filePath("k3perf")))};
}

// --- The command lines --------------------------------------------------------------------------------------

JobSpec run_job(const RunRequest& r) {
  JobSpec spec;
  spec.trace_path = QDir(r.out_dir).filePath("trace_" + r.stamp + ".json.gz");
  spec.prediction_path = QDir(r.out_dir).filePath("pred_" + r.stamp + ".json");
  QStringList& a = spec.arguments;
  a << "run";
  if (!r.scenario.isEmpty()) {
    a << r.scenario;
  } else {
    a << "--model" << r.model;
  }
  a << "--weights" << r.weights;
  if (r.layers > 0) a << "--layers" << QString::number(r.layers);
  for (const QString& set : r.sets) a << "--set" << set;
  a << "--trace" << spec.trace_path << "--prediction-json" << spec.prediction_path;
  return spec;
}

JobSpec profile_job(const QStringList& program, const QString& out_dir, const QString& stamp) {
  JobSpec spec;
  spec.trace_path = QDir(out_dir).filePath("trace_" + stamp + ".json.gz");
  spec.arguments << "profile"
                 << "-o" << spec.trace_path << "--" << program;
  return spec;
}

// --- Progress ---------------------------------------------------------------------------------------------

std::optional<JobProgress> parse_progress(const QString& line) {
  // engine/runtime/run_loop.cpp and device_weights.cpp print these.
  static const QRegularExpression counted(R"(^(decode step|prefill sequence) (\d+)/(\d+)\b)");
  static const QRegularExpression loaded(R"(^loaded ([0-9.]+) GiB of ([0-9.]+) GiB)");
  if (const auto m = counted.match(line); m.hasMatch()) {
    const double done = m.captured(2).toDouble(), total = m.captured(3).toDouble();
    return JobProgress{QString("%1 %2 of %3").arg(m.captured(1), m.captured(2), m.captured(3)),
                       total > 0 ? std::optional<double>(done / total) : std::nullopt};
  }
  if (const auto m = loaded.match(line); m.hasMatch()) {
    const double done = m.captured(1).toDouble(), total = m.captured(2).toDouble();
    return JobProgress{"loading weights", total > 0 ? std::optional<double>(done / total) : std::nullopt};
  }
  if (line.startsWith("generating random weights")) return JobProgress{"generating random weights", std::nullopt};
  if (line.startsWith("warm-up prefill")) return JobProgress{"warm-up prefill done", std::nullopt};
  if (line.startsWith("trace: ")) return JobProgress{"trace written", 1.0};
  return std::nullopt;
}

// --- The child process ------------------------------------------------------------------------------------

ProfileJob::ProfileJob(QObject* parent) : QObject(parent) {
  kill_timer_ = new QTimer(this);
  kill_timer_->setSingleShot(true);
  connect(kill_timer_, &QTimer::timeout, this, [this] {
    if (running()) signal_group(SIGKILL);
  });
}

ProfileJob::~ProfileJob() {
  if (process_ && process_->state() != QProcess::NotRunning) {
    signal_group(SIGKILL);
    process_->waitForFinished(1000);
  }
}

bool ProfileJob::start(const QString& program, const QStringList& arguments) {
  if (running()) return false;
  if (process_) process_->deleteLater();
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::MergedChannels);
  // Its own process group, so that Cancel reaches what it starts (k3perf profile forks the program).
  process_->setChildProcessModifier([] { ::setpgid(0, 0); });
  connect(process_, &QProcess::readyReadStandardOutput, this, &ProfileJob::read_output);
  connect(process_, &QProcess::finished, this, &ProfileJob::on_finished);
  connect(process_, &QProcess::errorOccurred, this, &ProfileJob::on_error);
  program_ = program;
  arguments_ = arguments;
  state_ = State::running;
  exit_code_ = -1;
  cancel_requested_ = false;
  start_error_.clear();
  partial_.clear();
  lines_.clear();
  progress_.reset();
  final_elapsed_ms_ = -1;
  clock_.start();
  process_->start(program, arguments);
  return true;
}

void ProfileJob::cancel(int grace_ms) {
  if (!running()) return;
  cancel_requested_ = true;
  signal_group(SIGTERM);
  kill_timer_->start(grace_ms);
}

void ProfileJob::signal_group(int signal_number) {
  const qint64 pid = process_ ? process_->processId() : 0;
  if (pid <= 0) return;
  // The child may not have run its setpgid yet: then only it exists to be signalled.
  if (::kill(-static_cast<pid_t>(pid), signal_number) != 0) ::kill(static_cast<pid_t>(pid), signal_number);
}

QString ProfileJob::status_text() const {
  switch (state_) {
    case State::idle: return "not started";
    case State::running: return cancel_requested_ ? "cancelling" : "running";
    case State::succeeded: return "finished (exit status 0)";
    case State::cancelled: return "cancelled";
    case State::failed:
      if (!start_error_.isEmpty()) return start_error_;
      return exit_code_ >= 0 ? QString("failed: exited with status %1").arg(exit_code_) : "failed: killed by a signal";
  }
  return {};
}

qint64 ProfileJob::elapsed_ms() const {
  if (final_elapsed_ms_ >= 0) return final_elapsed_ms_;
  return clock_.isValid() ? clock_.elapsed() : 0;
}

QString ProfileJob::command_line() const {
  QStringList quoted{program_};
  for (const QString& a : arguments_) quoted << (a.contains(' ') ? '\'' + a + '\'' : a);
  return quoted.join(' ');
}

void ProfileJob::read_output() {
  QString text = partial_ + QString::fromLocal8Bit(process_->readAllStandardOutput());
  text.replace('\r', '\n');  // a progress line rewritten in place is a line too
  QStringList parts = text.split('\n');
  partial_ = parts.takeLast();
  for (const QString& line : parts) {
    if (!line.isEmpty()) add_line(line);
  }
}

void ProfileJob::add_line(const QString& line) {
  lines_ << line;
  emit output_line(line);
  if (std::optional<JobProgress> p = parse_progress(line)) {
    progress_ = std::move(p);
    emit progress_changed();
  }
}

void ProfileJob::on_finished(int exit_code, QProcess::ExitStatus status) {
  read_output();
  if (!partial_.isEmpty()) add_line(partial_);
  partial_.clear();
  kill_timer_->stop();
  final_elapsed_ms_ = clock_.elapsed();
  exit_code_ = status == QProcess::NormalExit ? exit_code : -1;
  if (cancel_requested_) {
    state_ = State::cancelled;
  } else {
    state_ = exit_code_ == 0 ? State::succeeded : State::failed;
  }
  emit finished();
}

void ProfileJob::on_error(QProcess::ProcessError error) {
  if (error != QProcess::FailedToStart || !running()) return;  // the others end in finished()
  final_elapsed_ms_ = clock_.elapsed();
  start_error_ = QString("cannot start %1: %2").arg(program_, process_->errorString());
  state_ = State::failed;
  emit finished();
}

}  // namespace k3::gui
