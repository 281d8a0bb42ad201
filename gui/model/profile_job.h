// Profiling on this machine from the GUI, UI-free: whether there is an NVIDIA GPU (probed without linking
// CUDA, the probe injectable for tests), which k3perf binary runs, the command lines of `k3perf run … --trace`
// (cli/run_command.cpp) and `k3perf profile -o … -- program` (cli/profile_command.cpp), the progress lines
// they print, and the child process itself: its output streamed line by line, its exit status, and Cancel
// (SIGTERM to its process group, SIGKILL after a grace period, so a profiled program goes too).
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <functional>
#include <optional>

class QTimer;

namespace k3::gui {

// --- Is there a GPU ---------------------------------------------------------------------------------------
struct GpuProbe {
  std::function<bool(const QString& path)> exists;
  std::function<QString(const QString& program)> find_program;  // its path, or "" when not on PATH
  // Runs a program to its end; its exit status (−1: did not start or crashed) and its stdout in `output`.
  std::function<int(const QString& program, const QStringList& arguments, QString* output)> run;
  static GpuProbe system();  // the file system, PATH and QProcess of this machine
};

struct GpuCheck {
  bool found = false;
  QString text;  // "GPU 0: NVIDIA H200 (UUID: …)", or why none: "no NVIDIA GPU found: …"
};

// A GPU is there when `nvidia-smi -L` lists one, or when /dev/nvidia0 exists (containers often lack the tool).
GpuCheck detect_gpu(const GpuProbe& probe);

// --- Which k3perf -------------------------------------------------------------------------------------------
struct K3perfBinary {
  QString path;  // "" when none was found
  QString how;   // "beside k3perf-gui", "on PATH", or where it looked
};

// The k3perf of the same build as k3perf-gui in `app_dir` (build tree: <build>/gui/app → <build>/cli/k3perf;
// an installed bin/: the same folder), else the one on PATH (`path_dirs`; empty: $PATH).
K3perfBinary find_k3perf(const QString& app_dir, const QStringList& path_dirs = {});

// --- The command lines --------------------------------------------------------------------------------------
struct JobSpec {
  QStringList arguments;    // after the k3perf binary
  QString trace_path;       // what it writes on success
  QString prediction_path;  // "" when it writes none
};

struct RunRequest {
  QString scenario;  // a scenario YAML; "" runs `model`
  QString model = "kimi-k3";
  QStringList sets;  // "key=value" edits, each passed as --set
  QString weights = "random:7";
  int layers = 4;  // 0: all
  QString out_dir;
  QString stamp;  // names the files: trace_<stamp>.json.gz, pred_<stamp>.json
};

// `k3perf run [scenario] --weights W --layers N --set … --trace T --prediction-json P`.
JobSpec run_job(const RunRequest& r);
// `k3perf profile -o T -- program…`: any CUDA program, its NVTX ranges as the op ranges.
JobSpec profile_job(const QStringList& program, const QString& out_dir, const QString& stamp);

// --- Progress ---------------------------------------------------------------------------------------------
struct JobProgress {
  QString stage;                   // "decode step 3 of 24", "loading weights", …
  std::optional<double> fraction;  // of that stage, 0..1; none when the line gives no count
};

// What one line of `k3perf run`'s output says of its progress (engine/runtime's progress lines); none for
// other lines.
std::optional<JobProgress> parse_progress(const QString& line);

// --- The child process ------------------------------------------------------------------------------------
class ProfileJob : public QObject {
  Q_OBJECT

 public:
  enum class State { idle, running, succeeded, failed, cancelled };

  explicit ProfileJob(QObject* parent = nullptr);
  ~ProfileJob() override;

  // Starts `program arguments` with stdout and stderr merged; refused (false) while one runs.
  bool start(const QString& program, const QStringList& arguments);
  // SIGTERM to the job's process group now, SIGKILL after `grace_ms` if it still runs.
  void cancel(int grace_ms = 3000);

  State state() const { return state_; }
  bool running() const { return state_ == State::running; }
  int exit_code() const { return exit_code_; }  // −1 until it exits normally
  QString status_text() const;                  // "running", "exited with status 3", "cancelled", …
  const QStringList& lines() const { return lines_; }
  QString last_line() const { return lines_.isEmpty() ? QString() : lines_.back(); }
  const std::optional<JobProgress>& progress() const { return progress_; }
  qint64 elapsed_ms() const;  // since start, frozen at the end
  QString command_line() const;

 signals:
  void output_line(const QString& line);
  void progress_changed();
  void finished();

 private:
  void read_output();
  void add_line(const QString& line);
  void on_finished(int exit_code, QProcess::ExitStatus status);
  void on_error(QProcess::ProcessError error);
  void signal_group(int signal_number);

  QProcess* process_ = nullptr;
  QTimer* kill_timer_ = nullptr;
  State state_ = State::idle;
  int exit_code_ = -1;
  bool cancel_requested_ = false;
  QString start_error_;
  QString partial_;  // output after the last newline
  QStringList lines_;
  std::optional<JobProgress> progress_;
  QElapsedTimer clock_;
  qint64 final_elapsed_ms_ = -1;
  QString program_;
  QStringList arguments_;
};

}  // namespace k3::gui
