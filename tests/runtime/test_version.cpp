// dvm/version.h and dvm::version(): the header's macros, the linked
// library's string and the project(VERSION) line of CMakeLists.txt (read
// here, the one place the version is written) all say the same.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "dvm/dvm.h"

namespace {

// "X.Y.Z" from `project(dvm ... VERSION X.Y.Z)` in the top-level CMakeLists.txt
// (found by hand: <regex> trips GCC 12's -Wmaybe-uninitialized in the
// sanitizer build).
std::string project_version() {
  std::ifstream in(std::string(DVM_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t p = s.find("project(dvm");
  if (p == std::string::npos) return "";
  const size_t close = s.find(')', p), v = s.find("VERSION ", p);
  if (v == std::string::npos || v > close) return "";
  size_t e = v + 8;
  while (e < close && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '.')) ++e;
  return s.substr(v + 8, e - (v + 8));
}

TEST(Version, LibraryHeaderAndProjectAgree) {
  const std::string lib = dvm::version();
  const std::string parts = std::to_string(DVM_VERSION_MAJOR) + "." + std::to_string(DVM_VERSION_MINOR) + "." +
                            std::to_string(DVM_VERSION_PATCH);
  EXPECT_EQ(lib, DVM_VERSION_STRING);
  EXPECT_EQ(lib, parts);
  EXPECT_EQ(lib, project_version()) << "CMakeLists.txt's project(VERSION) line was not found or differs";
  EXPECT_EQ(DVM_VERSION, DVM_VERSION_MAJOR * 10000 + DVM_VERSION_MINOR * 100 + DVM_VERSION_PATCH);
}

TEST(Version, UsableInThePreprocessor) {
  // A consumer gates code on the version with #if; the macros must be
  // integer literals for that.
#if DVM_VERSION_MAJOR >= 0 && DVM_VERSION >= 0
  SUCCEED();
#else
  FAIL() << "DVM_VERSION macros are not preprocessor integers";
#endif
}

}  // namespace
