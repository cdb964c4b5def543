#!/usr/bin/env bash
# Builds dvm and the concurrency tests (tests/threads/, test_threads) with
# ThreadSanitizer (build-tsan/, -O1 -g) and runs them; any TSan report fails
# the run (halt_on_error=1, exitcode=66).
#   scripts/ci_tsan.sh
#
# What it covers. Debian's libtbb is not built with TSan: TSan sees neither
# its atomics nor its waits, so every launch that TBB splits across workers
# floods it with false reports from TBB's own frames and from kernels run on
# its workers. So the job runs in two parts:
#  1. DVM_NUM_THREADS=1, every test but the one below: launches run on the thread that flushes
#     (vm/parallel.cpp never enters TBB), so every report is about dvm's own
#     code, with no suppression at all: several threads recording and
#     flushing at once, the kernel cache (DVM_KERNEL_CACHE=4: constant
#     eviction), tiering (DVM_JIT_THRESHOLD=1: every kernel compiles on the
#     background thread at its first launch, while others launch it),
#     stats counters, shared read-only tensors and their handles' reference
#     counts, and the cross-thread pending-tensor check.
#  2. Concurrency.SetNumThreadsWhileOthersLaunch with the default thread
#     count: launches split on TBB arenas while set_num_threads() replaces
#     them. scripts/tsan.supp drops reports with a frame inside libtbb.so
#     (TBB's code and the kernels its workers run); reports in dvm's frames
#     of the launching and configuring threads (the arena's ownership in
#     vm/parallel.cpp) still fail the run.
# Machine code made by the JIT is not instrumented (TSan checks the
# interpreter's accesses and all of dvm's C++).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
start=$(date +%s)
flags="-fsanitize=thread -O1 -g -fno-omit-frame-pointer"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DDVM_BUILD_BENCH=OFF -DDVM_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_threads
base="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4"
export DVM_JIT_THRESHOLD=1 DVM_KERNEL_CACHE=4 DVM_PLAN_CHECK=1
for round in 1 2 3; do
  TSAN_OPTIONS="$base" DVM_NUM_THREADS=1 build-tsan/tests/test_threads --gtest_brief=1 \
    --gtest_filter=-Concurrency.SetNumThreadsWhileOthersLaunch
done
TSAN_OPTIONS="$base:suppressions=$PWD/scripts/tsan.supp" \
  build-tsan/tests/test_threads --gtest_brief=1 --gtest_filter=Concurrency.SetNumThreadsWhileOthersLaunch \
  --gtest_repeat=5
echo "dvm: TSan concurrency tests passed in $(( $(date +%s) - start )) s" >&2
