#!/usr/bin/env bash
# Builds bench_dvm (Release), runs it, and renders docs/PERFORMANCE.md.
#
#   scripts/bench.sh                                   # the whole suite
#   scripts/bench.sh --benchmark_filter='W1|W3|W6'     # arguments go to bench_dvm
#
# Every benchmark runs 5 times; the JSON (build/bench.json) keeps the
# aggregates (median, mean, stddev, cv) and the table reports medians.
# BUILD_DIR overrides the build directory (default: build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="$build/bench.json"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_dvm

"$build/bench/bench_dvm" \
  --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" \
  --benchmark_out_format=json \
  "$@"

python3 "$root/scripts/render_perf.py" "$out" "$root/docs/PERFORMANCE.md" --repo "$root" \
  --args="--benchmark_repetitions=5 --benchmark_report_aggregates_only=true $*"
echo "wrote $root/docs/PERFORMANCE.md from $out"
