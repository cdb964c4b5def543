// Lets a test that needs machine code skip, with the reason shown, in a build
// without the JIT (CMake option DVM_JIT=OFF; DVM_HAS_JIT comes from dvm_internal).
#pragma once

#include <gtest/gtest.h>

#define DVM_SKIP_WITHOUT_JIT() \
  if (!DVM_HAS_JIT) GTEST_SKIP() << "built without the JIT (DVM_JIT=OFF)"
