#!/usr/bin/env bash
# Installs what is missing, builds dvm (Release) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
# The libtorch comparison is for benchmark runs (scripts/bench.sh), not tests.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDVM_BENCH_LIBTORCH=OFF >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
