// Outputs that are never seen half-written. A file goes to a temporary beside the target, created exclusively
// (never through a link someone left there), synced and renamed over it: a failed, interrupted or killed run
// leaves the old file or none. A folder of files (a checkpoint) is written as a fresh sibling folder and swapped
// in whole. Temporaries are named ".<name>.tmp.<pid>.<n>"; those of processes that no longer run (killed before
// they could clean up) are removed by the next write of the same target.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace k3 {

void write_file_atomically(const std::string& path, const std::string& contents);
std::string read_file(const std::string& path);  // InputError naming the path when unreadable

// One file written in pieces, then committed. Without commit() (an exception, a return), the temporary is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // InputError when the folder is missing or not writable
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);  // InputError naming the file on a write error (a full disk)
  void commit();                       // flush, sync, rename over the target
  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }
  uint64_t bytes_written() const { return written_; }

 private:
  void flush();
  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  std::string buffer_;
  uint64_t written_ = 0;
};

// A folder of outputs: files are written into a fresh sibling of `path`, and commit() puts it in place of `path`
// in one step (the old folder, if any, is then removed). `path` may be absent or a folder that holds only files
// `replaceable` accepts (a checkpoint's own files); anything else is an InputError naming the first other file, so
// that a folder of unrelated files is never removed. Without commit(), the sibling is removed.
class AtomicDirectory {
 public:
  AtomicDirectory(std::string path, bool (*replaceable)(const std::string& file_name));
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  const std::string& staging() const { return staging_; }  // where the files go until commit()
  void commit();

 private:
  std::string path_;
  std::string staging_;
  bool committed_ = false;
};

}  // namespace k3
