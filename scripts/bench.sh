#!/usr/bin/env bash
# Builds bench_dvm (Release), runs it, and renders docs/PERFORMANCE.md.
#
#   scripts/bench.sh                                   # the whole suite
#   scripts/bench.sh --benchmark_filter='W1|W3|W6'     # arguments go to bench_dvm
#
# Every benchmark runs REPETITIONS times (default 5), the repetitions of all
# benchmarks interleaved in random order, so a minute in which another process
# holds a core spoils one repetition of many benchmarks rather than all of a
# few; the JSON (build/bench.json) keeps the aggregates (median, mean, stddev,
# cv) and the tables report medians. BUILD_DIR overrides the build directory (default:
# build). libtorch is compared where libtorch-dev is installed;
# DVM_BENCH_LIBTORCH=OFF builds without it. NOTE adds a line to the page.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="$build/bench.json"
reps="${REPETITIONS:-5}"

# The build directory may come from scripts/test.sh, which turns libtorch off.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDVM_BENCH_LIBTORCH="${DVM_BENCH_LIBTORCH:-ON}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_dvm

flags=(--benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true
       --benchmark_report_aggregates_only=true)
"$build/bench/bench_dvm" \
  "${flags[@]}" \
  --benchmark_out="$out" \
  --benchmark_out_format=json \
  "$@"
load_end="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"

notes=()
[ -n "${NOTE:-}" ] && notes+=(--note "$NOTE")
python3 "$root/scripts/render_perf.py" "$out" "$root/docs/PERFORMANCE.md" --repo "$root" \
  --args="${flags[*]} $*" \
  --load-end "$load_end" "${notes[@]}"
echo "wrote $root/docs/PERFORMANCE.md from $out"
