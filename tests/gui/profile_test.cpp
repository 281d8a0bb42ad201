// Profiling from the GUI: the GPU probe's two answers (probe injected), the k3perf binary found beside the
// GUI or on PATH, the command lines against the real CLI (`k3perf run … --dry-run`), progress parsed from a
// committed run's log, and the job runner with real child processes: output, exit status, Cancel within a
// second (also of a program that ignores SIGTERM, and of the children it started). The view: disabled with
// the reason without a GPU; with one, a run that ends with status 0 opens its trace and prediction.
#include "core/data_paths.h"
#include "gui/model/document.h"
#include "gui/model/profile_job.h"
#include "gui/views/profile_view.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using k3::gui::GpuCheck;
using k3::gui::GpuProbe;
using k3::gui::K3perfBinary;
using k3::gui::ProfileJob;

namespace {
const QString kSource = K3PERF_SOURCE_DIR;
const QString kRun = kSource + "/bench/results/2026-12-01-h200-engine-traces-9";
k3::DataPaths data() { return k3::DataPaths::under(kSource.toStdString() + "/scenarios"); }

// A probe over a pretend machine: these files exist, nvidia-smi is at `smi` ("" absent) and answers so.
GpuProbe probe(QStringList files, QString smi, int smi_status, QString smi_output) {
  GpuProbe p;
  p.exists = [files](const QString& path) { return files.contains(path); };
  p.find_program = [smi](const QString& program) { return program == "nvidia-smi" ? smi : QString(); };
  p.run = [smi_status, smi_output](const QString&, const QStringList& arguments, QString* output) {
    if (arguments != QStringList{"-L"}) return 64;
    *output = smi_output;
    return smi_status;
  };
  return p;
}

void write_executable(const QString& path, const QString& text) {
  QDir().mkpath(QFileInfo(path).path());
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(text.toUtf8());
  f.close();
  QVERIFY(f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
}

// Runs the job to its end (at most `timeout_ms`).
bool wait_for(ProfileJob& job, int timeout_ms = 10000) {
  QElapsedTimer t;
  t.start();
  while (job.running() && t.elapsed() < timeout_ms) QTest::qWait(10);
  return !job.running();
}

// Whether a process lives (a zombie waiting for its reaper does not).
bool alive(qint64 pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_text, name, state;
  if (!(stat >> pid_text >> name >> state)) return false;
  return state != "Z" && state != "X";
}

double drawn_share(const QImage& image) {
  const QRgb background = image.pixel(0, 0);
  long long differ = 0;
  for (int y = 0; y < image.height(); y += 2) {
    for (int x = 0; x < image.width(); x += 2) differ += image.pixel(x, y) != background;
  }
  return static_cast<double>(differ) / ((image.width() / 2) * (image.height() / 2));
}

// The k3perf of this build tree: the tests' folder is <build>/tests, k3perf-gui's <build>/gui/app.
K3perfBinary this_builds_k3perf() {
  return k3::gui::find_k3perf(QCoreApplication::applicationDirPath() + "/../gui/app");
}
}  // namespace

class ProfileTest : public QObject {
  Q_OBJECT

 private slots:
  void no_gpu_says_what_it_looked_for() {
    const GpuCheck none = k3::gui::detect_gpu(probe({}, "", 0, ""));
    QVERIFY(!none.found);
    QCOMPARE(none.text, QString("no NVIDIA GPU found: /dev/nvidia0 absent and nvidia-smi not found"));
    const GpuCheck failing = k3::gui::detect_gpu(probe({}, "/usr/bin/nvidia-smi", 9, "NVIDIA-SMI has failed\n"));
    QVERIFY(!failing.found);
    QCOMPARE(failing.text, QString("no NVIDIA GPU found: /dev/nvidia0 absent and nvidia-smi -L exited with status 9: "
                                   "NVIDIA-SMI has failed"));
  }

  void a_gpu_is_found_by_nvidia_smi_or_its_device() {
    const GpuCheck listed = k3::gui::detect_gpu(
        probe({}, "/usr/bin/nvidia-smi", 0, "GPU 0: NVIDIA H200 (UUID: GPU-1)\nGPU 1: NVIDIA H200 (UUID: GPU-2)\n"));
    QVERIFY(listed.found);
    QCOMPARE(listed.text, QString("GPU 0: NVIDIA H200 (UUID: GPU-1)"));
    const GpuCheck device = k3::gui::detect_gpu(probe({"/dev/nvidia0"}, "", 0, ""));
    QVERIFY(device.found);
    QCOMPARE(device.text, QString("/dev/nvidia0 present (nvidia-smi not found)"));
  }

  void the_system_probe_answers_as_this_machine_is() {
    const GpuCheck here = k3::gui::detect_gpu(GpuProbe::system());
    const bool device = QFileInfo::exists("/dev/nvidia0");
    const bool smi = !QStandardPaths::findExecutable("nvidia-smi").isEmpty();
    if (!device && !smi) {
      QVERIFY(!here.found);
      QCOMPARE(here.text, QString("no NVIDIA GPU found: /dev/nvidia0 absent and nvidia-smi not found"));
    }
    if (device) QVERIFY(here.found);
  }

  void k3perf_is_found_beside_the_gui_then_on_path() {
    QTemporaryDir dir;
    const QString app = dir.filePath("build/gui/app");
    QDir().mkpath(app);
    const QString on_path = dir.filePath("bin");
    write_executable(on_path + "/k3perf", "#!/bin/sh\n");
    K3perfBinary found = k3::gui::find_k3perf(app, {on_path});
    QCOMPARE(found.how, QString("on PATH"));
    QCOMPARE(found.path, on_path + "/k3perf");
    write_executable(dir.filePath("build/cli/k3perf"), "#!/bin/sh\n");
    found = k3::gui::find_k3perf(app, {on_path});
    QCOMPARE(found.how, QString("beside k3perf-gui"));
    QCOMPARE(found.path, QFileInfo(dir.filePath("build/cli/k3perf")).canonicalFilePath());
    const K3perfBinary none = k3::gui::find_k3perf(dir.filePath("elsewhere"), {dir.filePath("empty")});
    QVERIFY(none.path.isEmpty());
    QVERIFY(none.how.startsWith("not found"));
  }

  void the_command_lines_are_the_clis() {
    k3::gui::RunRequest r;
    r.scenario = "s.yaml";
    r.sets = {"workload.batch=2", "workload.context_tokens=4096"};
    r.out_dir = "/out";
    r.stamp = "x";
    const k3::gui::JobSpec run = k3::gui::run_job(r);
    QCOMPARE(run.arguments, QStringList({"run", "s.yaml", "--weights", "random:7", "--layers", "4", "--set",
                                         "workload.batch=2", "--set", "workload.context_tokens=4096", "--trace",
                                         "/out/trace_x.json.gz", "--prediction-json", "/out/pred_x.json"}));
    QCOMPARE(run.trace_path, QString("/out/trace_x.json.gz"));
    const k3::gui::JobSpec prof = k3::gui::profile_job({"./app", "--steps", "3"}, "/out", "y");
    QCOMPARE(prof.arguments, QStringList({"profile", "-o", "/out/trace_y.json.gz", "--", "./app", "--steps", "3"}));
    QVERIFY(prof.prediction_path.isEmpty());
  }

  // No scenario: `--model kimi-k3` (the committed scenarios span several GPUs; the engine runs on one).
  void the_real_k3perf_accepts_the_run_command_line() {
    const K3perfBinary k3perf = this_builds_k3perf();
    QVERIFY2(!k3perf.path.isEmpty(), "build the k3perf target first (the tests run the CLI)");
    QCOMPARE(k3perf.how, QString("beside k3perf-gui"));
    QTemporaryDir out;
    k3::gui::RunRequest r;
    r.sets = {"workload.batch=2"};
    r.out_dir = out.path();
    r.stamp = "dry";
    ProfileJob job;
    job.start(k3perf.path, k3::gui::run_job(r).arguments << "--dry-run");
    QVERIFY(wait_for(job, 60000));
    QVERIFY2(job.state() == ProfileJob::State::succeeded, qPrintable(job.lines().join('\n')));
    const QString out_text = job.lines().join('\n');
    QVERIFY2(out_text.contains("kimi-k3 (4 layers)"), qPrintable(out_text));
    QVERIFY2(out_text.contains("engine: batch 2"), qPrintable(out_text));
    QVERIFY2(out_text.contains("predicted on"), qPrintable(out_text));
  }

  void progress_follows_a_recorded_run() {
    QFile log(kSource + "/bench/results/2026-11-30-h200-engine-traces-3/counters_b1.log");
    QVERIFY(log.open(QIODevice::ReadOnly));
    QStringList stages;
    std::optional<double> last_fraction;
    for (const QString& line : QString::fromUtf8(log.readAll()).split('\n')) {
      if (const auto p = k3::gui::parse_progress(line)) {
        stages << p->stage;
        last_fraction = p->fraction;
      }
    }
    QCOMPARE(stages, QStringList({"generating random weights", "warm-up prefill done", "prefill sequence 1 of 1",
                                  "decode step 4 of 4"}));
    QCOMPARE(*last_fraction, 1.0);
    const auto loading = k3::gui::parse_progress("loaded 13.0 GiB of 52.0 GiB");
    QCOMPARE(loading->stage, QString("loading weights"));
    QCOMPARE(*loading->fraction, 0.25);
    QCOMPARE(*k3::gui::parse_progress("decode step 6/24: 2.651 ms")->fraction, 0.25);
  }

  void a_job_streams_its_output_and_reports_its_exit_status() {
    ProfileJob job;
    QSignalSpy lines(&job, &ProfileJob::output_line);
    QSignalSpy finished(&job, &ProfileJob::finished);
    QVERIFY(job.start("/bin/sh", {"-c", "echo one; echo two >&2; printf 'decode step 1/4: 1 ms'; exit 3"}));
    QVERIFY(!job.start("/bin/true", {}));  // one at a time
    QVERIFY(wait_for(job));
    QCOMPARE(finished.count(), 1);
    QCOMPARE(job.lines(), QStringList({"one", "two", "decode step 1/4: 1 ms"}));
    QCOMPARE(lines.count(), 3);
    QCOMPARE(job.state(), ProfileJob::State::failed);
    QCOMPARE(job.exit_code(), 3);
    QCOMPARE(job.status_text(), QString("failed: exited with status 3"));
    QCOMPARE(job.progress()->stage, QString("decode step 1 of 4"));
    QVERIFY(job.start("/bin/sh", {"-c", "echo done"}));
    QVERIFY(wait_for(job));
    QCOMPARE(job.state(), ProfileJob::State::succeeded);
    QCOMPARE(job.exit_code(), 0);
    QCOMPARE(job.lines(), QStringList({"done"}));
  }

  void a_program_that_does_not_start_is_reported() {
    ProfileJob job;
    QSignalSpy finished(&job, &ProfileJob::finished);
    job.start("/nonexistent/k3perf", {"run"});
    QVERIFY(wait_for(job));
    QCOMPARE(finished.count(), 1);
    QCOMPARE(job.state(), ProfileJob::State::failed);
    QVERIFY2(job.status_text().startsWith("cannot start /nonexistent/k3perf"), qPrintable(job.status_text()));
  }

  void cancel_ends_sleep_within_a_second() {
    ProfileJob job;
    job.start("/bin/sleep", {"60"});
    QTest::qWait(100);
    QVERIFY(job.running());
    QElapsedTimer t;
    t.start();
    job.cancel();
    QVERIFY(wait_for(job, 1000));
    QVERIFY(t.elapsed() < 1000);
    QCOMPARE(job.state(), ProfileJob::State::cancelled);
    QCOMPARE(job.status_text(), QString("cancelled"));
  }

  void cancel_kills_a_program_that_ignores_sigterm_after_the_grace() {
    ProfileJob job;
    job.start("/bin/sh", {"-c", "trap '' TERM; echo ignoring; exec sleep 60"});
    QTRY_VERIFY_WITH_TIMEOUT(job.last_line() == "ignoring", 5000);  // the trap is set
    QElapsedTimer t;
    t.start();
    job.cancel(300);
    QTest::qWait(150);
    QVERIFY(job.running());  // SIGTERM ignored: still there within the grace
    QVERIFY(wait_for(job, 1000));
    QVERIFY(t.elapsed() >= 300);
    QCOMPARE(job.state(), ProfileJob::State::cancelled);
  }

  void cancel_reaches_the_programs_children() {
    ProfileJob job;
    job.start("/bin/sh", {"-c", "sleep 60 & echo $!; wait"});
    QElapsedTimer t;
    t.start();
    while (job.lines().isEmpty() && t.elapsed() < 5000) QTest::qWait(10);
    const qint64 child = job.last_line().toLongLong();
    QVERIFY(child > 0);
    QVERIFY(alive(child));
    job.cancel();
    QVERIFY(wait_for(job, 1000));
    QTRY_VERIFY_WITH_TIMEOUT(!alive(child), 1000);
  }

  void without_a_gpu_the_actions_are_disabled_and_say_why() {
    k3::gui::Document document(data());
    const GpuCheck none = k3::gui::detect_gpu(probe({}, "", 0, ""));
    k3::gui::ProfileView view(&document, none, this_builds_k3perf());
    view.resize(1200, 800);
    QVERIFY(!view.run_button()->isEnabled());
    QVERIFY(!view.profile_button()->isEnabled());
    QVERIFY(!view.cancel_button()->isEnabled());
    QVERIFY(view.machine_text().contains("no NVIDIA GPU found: /dev/nvidia0 absent and nvidia-smi not found"));
    QVERIFY(view.machine_text().contains("(beside k3perf-gui)"));
    QCOMPARE(view.run_button()->toolTip(), none.text);
    QVERIFY(drawn_share(view.grab().toImage()) > 0.01);
  }

  void a_run_that_succeeds_opens_its_trace_and_prediction() {
    // A stand-in for `k3perf run` on a GPU: it writes a committed H200 run's files where it is told to.
    QTemporaryDir dir;
    const QString stand_in = dir.filePath("k3perf");
    write_executable(
        stand_in,
        QString("#!/bin/sh\n"
                "while [ $# -gt 0 ]; do\n"
                "  case \"$1\" in --trace) t=$2; shift;; --prediction-json) p=$2; shift;; esac\n"
                "  shift\n"
                "done\n"
                "echo 'decode step 24/24: 2.651 ms'\n"
                "cp '%1/trace_decode_b1_ctx8192.json.gz' \"$t\" && cp '%1/pred_decode_b1_ctx8192.json' \"$p\"\n")
            .arg(kRun));
    k3::gui::Document document(data());
    k3::gui::ProfileView view(&document, GpuCheck{true, "GPU 0: test"}, K3perfBinary{stand_in, "on PATH"});
    view.out_dir_edit()->setText(dir.filePath("runs"));
    QVERIFY(view.run_button()->isEnabled());
    QTest::mouseClick(view.run_button(), Qt::LeftButton);
    QVERIFY(!view.run_button()->isEnabled());
    QVERIFY(wait_for(*view.job()));
    QCOMPARE(view.job()->state(), ProfileJob::State::succeeded);
    QVERIFY(view.output_text().contains("decode step 24/24"));
    QVERIFY(document.trace() != nullptr);
    QVERIFY(document.comparison().has_value());
    QVERIFY2(view.status_text().contains("the Compare tab shows the comparison"), qPrintable(view.status_text()));
    QVERIFY(view.run_button()->isEnabled());
  }

  void cancel_in_the_view_stops_the_run() {
    QTemporaryDir dir;
    const QString stand_in = dir.filePath("k3perf");
    write_executable(stand_in, "#!/bin/sh\necho 'generating random weights (seed 7) on the GPU'\nexec sleep 60\n");
    k3::gui::Document document(data());
    k3::gui::ProfileView view(&document, GpuCheck{true, "GPU 0: test"}, K3perfBinary{stand_in, "on PATH"});
    view.out_dir_edit()->setText(dir.filePath("runs"));
    QTest::mouseClick(view.run_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(view.status_text().contains("generating random weights"), 5000);
    QVERIFY(view.cancel_button()->isEnabled());
    QTest::mouseClick(view.cancel_button(), Qt::LeftButton);
    QVERIFY(wait_for(*view.job(), 1000));
    QVERIFY(view.status_text().startsWith("cancelled"));
    QVERIFY(document.trace() == nullptr);
  }
};

QTEST_MAIN(ProfileTest)
#include "profile_test.moc"
