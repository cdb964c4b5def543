// A file written so that it replaces its path only once complete: a save
// that fails half-way (a full disk, a value whose computation fails) leaves
// the file that was there as it was.
#pragma once

#include <fstream>
#include <string>

namespace dvm::detail {

// A regular file (or a new one) is written beside `path` (path's file name
// + ".partial-...", the name cut to fit 255 bytes) and renamed over it by
// commit(), with the permissions of the file it replaces; a symbolic link,
// a device or a pipe is written in place, as it is (a rename would replace
// it). Destroyed uncommitted, it removes what it wrote beside.
class ReplaceFile {
 public:
  explicit ReplaceFile(const std::string& path);
  ~ReplaceFile();
  ReplaceFile(const ReplaceFile&) = delete;
  ReplaceFile& operator=(const ReplaceFile&) = delete;

  std::ofstream& out() { return out_; }
  // Where the bytes go: the file beside path, or path itself.
  const std::string& written() const { return written_; }
  bool beside() const { return written_ != path_; }
  // Closes the stream (flushing it) and renames the file into place. False
  // when the close or the rename fails (errno tells why); nothing is left
  // beside path then.
  bool commit();

 private:
  std::string path_, written_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace dvm::detail
