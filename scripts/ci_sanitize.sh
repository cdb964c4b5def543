#!/usr/bin/env bash
# Builds dvm with AddressSanitizer and UndefinedBehaviorSanitizer
# (DVM_SANITIZE, build-asan/) and runs the whole suite under them. Any report
# fails the run: UBSan does not recover, ASan stops at the first error, and
# leaks count.
#   scripts/ci_sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
start=$(date +%s)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDVM_SANITIZE=ON \
  -DDVM_BUILD_BENCH=OFF -DDVM_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"
echo "dvm: ASan+UBSan suite passed in $(( $(date +%s) - start )) s" >&2
