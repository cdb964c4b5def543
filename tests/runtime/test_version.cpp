// dvm/version.h and dvm::version(): the header's macros, the linked
// library's string and the project(VERSION) line of CMakeLists.txt (read
// here, the one place the version is written) all say the same.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "dvm/dvm.h"

namespace {

// "X.Y.Z" from `project(dvm ... VERSION X.Y.Z)` in the top-level CMakeLists.txt.
std::string project_version() {
  std::ifstream in(std::string(DVM_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  if (!std::regex_search(s, m, std::regex(R"(project\(dvm[^)]*VERSION ([0-9]+\.[0-9]+\.[0-9]+))")))
    return "";
  return m[1];
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
