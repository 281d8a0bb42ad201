// The Profile tab: records a trace on this machine's NVIDIA GPU with `k3perf run … --trace` (the engine) or
// `k3perf profile -- program` (any CUDA program), streaming the child's output, its progress and elapsed
// time, with Cancel; on success it opens the trace (and the run's prediction) so that the Compare tab
// follows. Without a GPU or a k3perf binary the actions are disabled and the view says why.
#pragma once

#include "gui/model/profile_job.h"

#include <QWidget>

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace k3::gui {

class Document;

class ProfileView : public QWidget {
  Q_OBJECT

 public:
  // Probes this machine: detect_gpu(GpuProbe::system()), find_k3perf(beside this executable).
  ProfileView(Document* document, QWidget* parent = nullptr);
  ProfileView(Document* document, GpuCheck gpu, K3perfBinary k3perf, QWidget* parent = nullptr);

  // For tests and the window: the controls and what the view shows.
  ProfileJob* job() const { return job_; }
  QPushButton* run_button() const { return run_button_; }
  QPushButton* profile_button() const { return profile_button_; }
  QPushButton* cancel_button() const { return cancel_button_; }
  QLineEdit* scenario_edit() const { return scenario_; }
  QLineEdit* program_edit() const { return program_; }
  QLineEdit* out_dir_edit() const { return out_dir_; }
  QString machine_text() const;
  QString status_text() const;
  QString output_text() const;

 private:
  void start(const JobSpec& spec);
  void on_finished();
  void update_controls();
  void update_progress();
  RunRequest run_request() const;

  Document* document_;
  GpuCheck gpu_;
  K3perfBinary k3perf_;
  ProfileJob* job_;
  JobSpec spec_;             // of the job running or last run
  QString scenario_origin_;  // the Document's, when the scenario field last followed it
  QLabel* gpu_label_;
  QLabel* binary_label_;
  QLineEdit* scenario_;
  QLineEdit* model_;
  QLineEdit* weights_;
  QSpinBox* layers_;
  QCheckBox* with_edits_;
  QLineEdit* program_;
  QLineEdit* out_dir_;
  QPushButton* run_button_;
  QPushButton* profile_button_;
  QPushButton* cancel_button_;
  QLabel* command_;
  QProgressBar* progress_;
  QLabel* status_;
  QPlainTextEdit* output_;
  QTimer* ticker_;
};

}  // namespace k3::gui
