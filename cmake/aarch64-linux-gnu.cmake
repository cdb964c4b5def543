# Toolchain file: cross-compiles for aarch64 Linux with Debian's
# g++-aarch64-linux-gnu. Libraries and package configs come from arm64
# packages installed multiarch (libtbb-dev:arm64, libgtest-dev:arm64, found
# under /usr/lib/aarch64-linux-gnu); test binaries run through qemu-aarch64
# (Debian's qemu-user), so ctest and gtest_discover_tests work.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
