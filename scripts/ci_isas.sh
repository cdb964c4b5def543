#!/usr/bin/env bash
# Runs the whole suite again with the ISA forced below the machine's best
# (DVM_ISA lowers it at first use), so every interpreter path and the JIT's
# AVX2 lowering run on a machine that would otherwise pick AVX-512.
#   scripts/ci_isas.sh [build dir, default build]   (after scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
isas=(portable)
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && isas+=(avx2)
for isa in "${isas[@]}"; do
  echo "dvm: whole suite with DVM_ISA=$isa" >&2
  start=$(date +%s)
  DVM_ISA="$isa" ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
  echo "dvm: DVM_ISA=$isa passed in $(( $(date +%s) - start )) s" >&2
done
