#!/usr/bin/env bash
# Cross-compiles dvm for aarch64 (portable backend, no JIT) with Debian's
# g++-aarch64-linux-gnu and runs the test suite under qemu-aarch64.
# Installs what is missing (needs root): the cross compiler, qemu-user, and
# the arm64 multiarch -dev packages of TBB and GoogleTest, which install side
# by side with the amd64 ones.
#   scripts/cross_aarch64.sh [build dir, default build-aarch64]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-aarch64}
jobs=$(nproc)

need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
dpkg -s libtbb-dev:arm64 >/dev/null 2>&1 || need+=(libtbb-dev:arm64)
dpkg -s libgtest-dev:arm64 >/dev/null 2>&1 || need+=(libgtest-dev:arm64)
if ((${#need[@]})); then
  echo "cross_aarch64: installing ${need[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DDVM_JIT=OFF -DDVM_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs"
# ctest runs each test binary through qemu-aarch64 (the toolchain file's
# emulator); the binaries load the arm64 dynamic linker and libraries that
# libc6:arm64 and the multiarch packages put under /lib and
# /usr/lib/aarch64-linux-gnu, so no QEMU_LD_PREFIX is needed.
ctest --test-dir "$build" --output-on-failure -j"$jobs"
echo "cross_aarch64: the *DeathTest.* suites are not run under qemu (tests/CMakeLists.txt says why)"
