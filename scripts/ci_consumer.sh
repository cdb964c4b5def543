#!/usr/bin/env bash
# Builds and installs dvm (Release; tests, benchmarks and examples off) into a
# temporary prefix, then builds examples/consumer against the installed
# package twice and runs it each time: with find_package(dvm) (CMake,
# CMAKE_PREFIX_PATH=prefix) and with `g++ $(pkg-config --cflags --libs dvm)`
# (PKG_CONFIG_PATH=the installed dvm.pc's directory), as C++17, the oldest standard the
# public headers accept.
#   scripts/ci_consumer.sh                  dvm with the JIT, built in build-consumer/
#   scripts/ci_consumer.sh --no-jit         dvm with -DDVM_JIT=OFF, in build-consumer-nojit/
#   scripts/ci_consumer.sh --prebuilt DIR   installs what DIR already built (scripts/ci_nojit.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
jit=ON
build=build-consumer
prebuilt=0
case "${1:-}" in
  "") ;;
  --no-jit) jit=OFF; build=build-consumer-nojit ;;
  --prebuilt) [ -n "${2:-}" ] || { echo "usage: $0 --prebuilt BUILD_DIR" >&2; exit 2; }
              build=$2; prebuilt=1
              jit=$(sed -n 's/^DVM_JIT:BOOL=//p' "$build/CMakeCache.txt") ;;
  *) echo "usage: $0 [--no-jit | --prebuilt BUILD_DIR]" >&2; exit 2 ;;
esac
scripts/install_deps.sh
if ! command -v pkg-config >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "ci_consumer: pkg-config is missing; run as root: apt-get install pkgconf" >&2; exit 1; }
  echo "ci_consumer: installing pkgconf" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pkgconf >/dev/null
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
if [ $prebuilt = 0 ]; then
  # lib, not lib64 or a multiarch directory, so the paths below hold.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDVM_JIT=$jit -DDVM_BUILD_TESTS=OFF \
    -DDVM_BUILD_BENCH=OFF -DDVM_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_LIBDIR=lib "${launcher[@]}" >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
fi
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "ci_consumer: installed dvm (JIT $jit) into $prefix:" >&2
(cd "$prefix" && find . -type f | sort | sed 's/^/  /') >&2

# find_package: a fresh CMake project that knows only the prefix.
cmake -S examples/consumer -B "$work/cmake" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" -j"$(nproc)" >/dev/null
"$work/cmake/dvm_consumer"

# pkg-config: plain --libs is enough (dvm.pc lists libdvm.a's dependencies in
# Libs and Requires); --static must give a working link line too.
pc=$(find "$prefix" -name dvm.pc)
export PKG_CONFIG_PATH=${pc%/dvm.pc}
echo "ci_consumer: pkg-config --cflags --libs dvm: $(pkg-config --cflags --libs dvm)" >&2
for mode in "" --static; do
  # shellcheck disable=SC2046  # pkg-config's output is a list of flags
  g++ -std=c++17 -O2 examples/consumer/main.cpp -o "$work/pc_consumer" $(pkg-config --cflags --libs $mode dvm)
  "$work/pc_consumer"
done
echo "ci_consumer: find_package and pkg-config consumers passed (JIT $jit) in $(( $(date +%s) - start )) s" >&2
