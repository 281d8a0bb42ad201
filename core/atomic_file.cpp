#include "core/atomic_file.h"

#include "core/error.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace k3 {

namespace fs = std::filesystem;

namespace {

fs::path folder_of(const fs::path& target) { return target.has_parent_path() ? target.parent_path() : fs::path("."); }

std::string temporary_prefix(const fs::path& target) { return "." + target.filename().string() + ".tmp."; }

// Removes the temporaries of `target` left by processes that no longer run (a SIGKILL leaves them behind).
void remove_stale_temporaries(const fs::path& target) {
  const std::string prefix = temporary_prefix(target);
  std::error_code ec;
  for (fs::directory_iterator it(folder_of(target), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    char* after = nullptr;
    const long pid = std::strtol(rest.c_str(), &after, 10);
    if (pid <= 0 || after == rest.c_str() || *after != '.') continue;
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

// A name for a new temporary beside `target`, unique within this process.
fs::path temporary_beside(const fs::path& target) {
  static std::atomic<uint64_t> created{0};
  return folder_of(target) / fmt::format("{}{}.{}", temporary_prefix(target), ::getpid(), created++);
}

void sync_folder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);  // the rename survives a crash of the machine; a failure here loses nothing already written
  ::close(fd);
}

constexpr std::size_t kBufferBytes = 1 << 20;

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const fs::path target(path_);
  const fs::path dir = folder_of(target);
  if (!fs::is_directory(dir)) throw InputError(fmt::format("{}: directory '{}' does not exist", path_, dir.string()));
  std::error_code ec;
  if (fs::is_directory(target, ec)) throw InputError(fmt::format("{}: is a directory, not a file", path_));
  remove_stale_temporaries(target);
  temporary_ = temporary_beside(target).string();
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot create '{}' ({})", path_, temporary_, std::strerror(errno)));
  buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  K3_CHECK(fd_ >= 0, "{}: written after commit()", path_);
  written_ += bytes.size();
  if (buffer_.size() + bytes.size() > kBufferBytes) flush();
  if (bytes.size() >= kBufferBytes) {
    buffer_.assign(bytes);
    flush();
  } else {
    buffer_.append(bytes);
  }
}

void AtomicFile::flush() {
  std::string_view rest = buffer_;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: write of '{}' failed ({})", path_, temporary_, std::strerror(errno)));
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  buffer_.clear();
}

void AtomicFile::commit() {
  K3_CHECK(fd_ >= 0, "{}: commit() called twice", path_);
  flush();
  if (::fsync(fd_) != 0) {
    throw InputError(fmt::format("{}: sync of '{}' failed ({})", path_, temporary_, std::strerror(errno)));
  }
  ::close(fd_);
  fd_ = -1;
  // rename() replaces a link at the target by the file itself: it never writes through it.
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    throw InputError(fmt::format("{}: cannot replace the file ({})", path_, std::strerror(errno)));
  }
  temporary_.clear();
  sync_folder(folder_of(fs::path(path_)));
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  AtomicFile file(path);
  file.write(contents);
  file.commit();
}

AtomicDirectory::AtomicDirectory(std::string path, bool (*replaceable)(const std::string& file_name))
    : path_(std::move(path)) {
  fs::path target(path_);
  if (!target.has_filename()) target = target.parent_path();  // "out/" names the folder "out"
  path_ = target.string();
  const fs::path parent = folder_of(target);
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (!fs::is_directory(parent)) {
    throw InputError(fmt::format("{}: cannot create the folder '{}' it goes in", path_, parent.string()));
  }
  const fs::file_status status = fs::symlink_status(target, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status)) throw InputError(fmt::format("{}: exists and is not a folder", path_));
    for (fs::directory_iterator it(target, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!replaceable(name)) {
        throw InputError(
            fmt::format("{}: holds '{}', which this command does not write; give a new or empty folder", path_, name));
      }
    }
  }
  remove_stale_temporaries(target);
  staging_ = temporary_beside(target).string();
  if (!fs::create_directory(staging_, ec)) {
    throw InputError(fmt::format("{}: cannot create '{}' ({})", path_, staging_, ec.message()));
  }
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void AtomicDirectory::commit() {
  K3_CHECK(!committed_, "{}: commit() called twice", path_);
  for (const auto& entry : fs::directory_iterator(staging_)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }
  sync_folder(staging_);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path_, ec))) {
    if (::rename(staging_.c_str(), path_.c_str()) != 0) {
      throw InputError(fmt::format("{}: cannot move '{}' in place ({})", path_, staging_, std::strerror(errno)));
    }
  } else {
    // One step: the old folder and the new one change places (Linux renameat2 RENAME_EXCHANGE); the old one, now
    // at the staging name, is removed after.
    constexpr unsigned kRenameExchange = 2;
    if (::syscall(SYS_renameat2, AT_FDCWD, staging_.c_str(), AT_FDCWD, path_.c_str(), kRenameExchange) != 0) {
      throw InputError(fmt::format("{}: cannot swap '{}' in ({})", path_, staging_, std::strerror(errno)));
    }
    fs::remove_all(staging_, ec);
  }
  committed_ = true;
  sync_folder(folder_of(fs::path(path_)));
}

std::string read_file(const std::string& path) {
  // An ifstream opens a directory and reads it as empty.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace k3
