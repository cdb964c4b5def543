// Files that replace their path once complete (tracer/replace_file.h).
#include "tracer/replace_file.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>

namespace dvm::detail {
namespace {

// Whether path is a regular file or nothing yet (else written in place).
bool replaceable(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status link = std::filesystem::symlink_status(path, ec);
  return ec || !std::filesystem::exists(link) || std::filesystem::is_regular_file(link);
}

// A name beside path, unique in this process: path's file name with a
// suffix, cut so that the whole stays within a file name's 255 bytes.
std::string partial_name(const std::string& path) {
  static std::atomic<uint64_t> files{0};
  const std::string suffix =
      ".partial-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" +
      std::to_string(files.fetch_add(1, std::memory_order_relaxed));
  constexpr size_t kMaxFileName = 255;
  const size_t slash = path.rfind('/');
  const size_t name_at = slash == std::string::npos ? 0 : slash + 1;
  const size_t keep = std::min(path.size() - name_at, kMaxFileName - suffix.size());
  return path.substr(0, name_at + keep) + suffix;
}

// The permission bits of the regular file at path, if there is one.
std::optional<std::filesystem::perms> permissions_of(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::is_regular_file(st)) return std::nullopt;
  return st.permissions();
}

}  // namespace

ReplaceFile::ReplaceFile(const std::string& path)
    : path_(path), written_(replaceable(path) ? partial_name(path) : path) {
  out_.open(written_, std::ios::binary | std::ios::trunc);
  // The file that replaces path keeps path's permissions, as a file
  // truncated in place would (a private file stays private).
  if (out_ && beside())
    if (const auto perms = permissions_of(path_)) {
      std::error_code ec;
      std::filesystem::permissions(written_, *perms, std::filesystem::perm_options::replace, ec);
    }
}

ReplaceFile::~ReplaceFile() {
  if (committed_) return;
  if (out_.is_open()) out_.close();
  if (beside()) std::remove(written_.c_str());
}

bool ReplaceFile::commit() {
  out_.close();  // flushes: a full disk may only show here
  if (!out_) return false;
  if (beside() && std::rename(written_.c_str(), path_.c_str()) != 0) return false;
  committed_ = true;
  return true;
}

}  // namespace dvm::detail
