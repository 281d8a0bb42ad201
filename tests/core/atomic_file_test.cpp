// Outputs under faults (core/atomic_file): the temporary is created exclusively and never through a link, the
// target is replaced (a link at its place too, never written through), temporaries of killed processes are
// removed by the next write, and a folder is swapped in whole or not at all.
#include "core/atomic_file.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace k3 {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("k3perf_atomic_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int entries() const { return static_cast<int>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

// The pid of a process that has ended (a child, reaped).
pid_t ended_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(AtomicFileTest, ReplacesTheFileAndLeavesNothingElse) {
  const std::string path = (dir_ / "out.csv").string();
  write_file_atomically(path, "one");
  write_file_atomically(path, "two");
  EXPECT_EQ(read_file(path), "two");
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicFileTest, AnUncommittedFileLeavesTheOldOne) {
  const std::string path = (dir_ / "out.csv").string();
  write_file_atomically(path, "old");
  {
    AtomicFile f(path);
    f.write(std::string(3 << 20, 'x'));  // past the buffer: bytes reach the temporary
    EXPECT_TRUE(fs::exists(f.temporary_path()));
  }
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicFileTest, ALinkAtTheTargetIsReplacedNotWrittenThrough) {
  const fs::path elsewhere = dir_ / "elsewhere";
  std::ofstream(elsewhere) << "theirs";
  fs::create_symlink(elsewhere, dir_ / "out.json");
  write_file_atomically((dir_ / "out.json").string(), "ours");
  EXPECT_EQ(read_file(elsewhere.string()), "theirs");
  EXPECT_FALSE(fs::is_symlink(dir_ / "out.json"));
  EXPECT_EQ(read_file((dir_ / "out.json").string()), "ours");
}

TEST_F(AtomicFileTest, TemporariesOfEndedProcessesAreRemovedOthersKept) {
  const fs::path stale = dir_ / (".out.json.tmp." + std::to_string(ended_pid()) + ".0");
  const fs::path live = dir_ / (".out.json.tmp." + std::to_string(::getppid()) + ".0");  // a running process
  const fs::path other = dir_ / (".other.json.tmp." + std::to_string(ended_pid()) + ".0");
  for (const fs::path& p : {stale, live, other}) std::ofstream(p) << "partial";
  write_file_atomically((dir_ / "out.json").string(), "x");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));  // another target's: its own next write removes it
}

TEST_F(AtomicFileTest, ErrorsNameThePath) {
  expect_input_error([&] { write_file_atomically((dir_ / "none" / "x.json").string(), "x"); },
                     {"x.json", "does not exist"});
  fs::create_directories(dir_ / "sub");
  expect_input_error([&] { write_file_atomically((dir_ / "sub").string(), "x"); }, {"sub", "is a directory"});
}

bool checkpoint_file(const std::string& name) { return name.ends_with(".safetensors") || name == "config.json"; }

TEST_F(AtomicFileTest, AFolderIsSwappedInWhole) {
  const fs::path out = dir_ / "ckpt";
  {
    AtomicDirectory d(out.string(), checkpoint_file);
    std::ofstream(fs::path(d.staging()) / "a.safetensors") << "old a";
    std::ofstream(fs::path(d.staging()) / "b.safetensors") << "old b";
    EXPECT_FALSE(fs::exists(out));  // nothing there until commit
    d.commit();
  }
  {
    AtomicDirectory d(out.string(), checkpoint_file);
    std::ofstream(fs::path(d.staging()) / "a.safetensors") << "new a";
    // destroyed without commit: the old folder stays whole
  }
  EXPECT_EQ(read_file((out / "a.safetensors").string()), "old a");
  EXPECT_TRUE(fs::exists(out / "b.safetensors"));
  {
    AtomicDirectory d(out.string(), checkpoint_file);
    std::ofstream(fs::path(d.staging()) / "a.safetensors") << "new a";
    d.commit();
  }
  EXPECT_EQ(read_file((out / "a.safetensors").string()), "new a");
  EXPECT_FALSE(fs::exists(out / "b.safetensors"));  // no mix of old and new
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicFileTest, AFolderOfOtherFilesIsNotReplaced) {
  const fs::path out = dir_ / "mine";
  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "keep";
  expect_input_error([&] { AtomicDirectory(out.string(), checkpoint_file); },
                     {"mine", "holds 'notes.txt'", "new or empty folder"});
  std::ofstream(dir_ / "file") << "x";
  expect_input_error([&] { AtomicDirectory((dir_ / "file").string(), checkpoint_file); }, {"is not a folder"});
  EXPECT_EQ(read_file((out / "notes.txt").string()), "keep");
}

TEST_F(AtomicFileTest, AStagingFolderOfAKilledRunIsRemoved) {
  const fs::path stale = dir_ / (".ckpt.tmp." + std::to_string(ended_pid()) + ".3");
  fs::create_directories(stale);
  std::ofstream(stale / "a.safetensors") << "partial";
  AtomicDirectory d((dir_ / "ckpt").string(), checkpoint_file);
  d.commit();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(entries(), 1);
}

}  // namespace
}  // namespace k3
