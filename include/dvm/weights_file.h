// Named tensors saved to and loaded from one binary file, in the format
// docs/WEIGHTS.md defines byte by byte.
#pragma once

#include <string>
#include <vector>

#include "dvm/tensor.h"

namespace dvm {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes tensors, in order, to path (created or truncated). Each must be
// float32, float16 or bfloat16, of any shape and layout (views and pending
// results are computed and written contiguous, row-major); names must be
// 1 to 4096 bytes of UTF-8 without NUL, and unique. A regular file (or a
// new one) is written beside path (path + ".partial-...", cut to fit a
// file name's 255 bytes), then renamed to path, with the permissions of the
// file it replaces (a new file: hard links to the old one keep its
// contents): on any error (dvm::Error naming save_weights, the path and the
// tensor), a bad argument, a full disk or a pending tensor whose
// computation fails, path is left as it was and the partial file removed.
// A symbolic link, a device or a pipe is written in place.
void save_weights(const std::string& path, const std::vector<NamedTensor>& tensors);

// Reads a file in that format: its tensors in file order, as new dvm-owned
// tensors of the stored dtypes. The whole file is validated before any
// tensor is made: any malformed input is a dvm::Error naming load_weights,
// the path, the byte offset and the tensor (index and name) when known, and
// a corrupt header never causes an allocation larger than the file.
std::vector<NamedTensor> load_weights(const std::string& path);

}  // namespace dvm
