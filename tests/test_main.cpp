// The entry point of every test binary: applies the environment's settings
// (tests drive the vm and the fuser directly, not only through the public
// API that applies them on first use), then runs the tests.
#include <gtest/gtest.h>

#include "runtime/environment.h"

int main(int argc, char** argv) {
  dvm::runtime::apply_environment();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
