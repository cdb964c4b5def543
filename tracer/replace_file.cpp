// Files that replace their path once complete (tracer/replace_file.h).
#include "tracer/replace_file.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace dvm::detail {
namespace {

// Whether path is a regular file or nothing yet (else written in place).
bool replaceable(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status link = std::filesystem::symlink_status(path, ec);
  return ec || !std::filesystem::exists(link) || std::filesystem::is_regular_file(link);
}

std::string partial_name(const std::string& path) {
  static std::atomic<uint64_t> files{0};
  return path + ".partial-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" +
         std::to_string(files.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace

ReplaceFile::ReplaceFile(const std::string& path)
    : path_(path), written_(replaceable(path) ? partial_name(path) : path) {
  out_.open(written_, std::ios::binary | std::ios::trunc);
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
