// dvm::Error: the one exception type the C++ API throws, with a precise message
// (which op, which shapes, what was expected).
#pragma once

#include <stdexcept>
#include <string>

namespace dvm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace dvm
