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
# cv) and the tables report medians. Short runs, one fresh process per
# system and workload, compare W1-W5 at 1M with libtorch on its own allocator
# (TORCH_DEFAULT_PASS=0 skips them).
# BUILD_DIR overrides the build directory (default: build). libtorch is
# compared where libtorch-dev is installed; DVM_BENCH_LIBTORCH=OFF builds
# without it. NOTE adds a line to the page.
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
# libtorch with its own allocator (the issue quotes both): W1-W5 at 1M, one
# thread, each system and workload in a fresh process of its own. glibc's
# malloc moves its mmap and trim thresholds after what a process has freed, so
# in a shared process whether libtorch's outputs fault depended on what ran
# before (W5: 2016 faults per call in one run, none in the next, none when dvm
# ran first); alone in a fresh process is what a program using PyTorch for
# that workload gets. TORCH_DEFAULT_PASS=0 skips it.
torch_jsons=()
rm -f "$build"/bench_torch_default*.json
torch_listed="$("$build/bench/bench_dvm" --benchmark_list_tests \
  --benchmark_filter='W[1-5]_[a-z_]+/libtorch/1048576/threads:1$' 2>/dev/null || true)"
if [ "${TORCH_DEFAULT_PASS:-1}" != 0 ] && [[ "$torch_listed" == *libtorch* ]]; then
  for w in 1 2 3 4 5; do
    for system in libtorch dvm; do
      json="$build/bench_torch_default_W${w}_$system.json"
      DVM_BENCH_TORCH_ALLOCATOR=default "$build/bench/bench_dvm" "${flags[@]}" \
        --benchmark_filter="W${w}_[a-z_]+/$system/1048576/threads:1\$" \
        --benchmark_out="$json" --benchmark_out_format=json
      torch_jsons+=("$json")
    done
  done
fi
load_end="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"

render_args=()
[ -n "${NOTE:-}" ] && render_args+=(--note "$NOTE")
for json in "${torch_jsons[@]}"; do render_args+=(--torch-default "$json"); done
python3 "$root/scripts/render_perf.py" "$out" "$root/docs/PERFORMANCE.md" --repo "$root" \
  --args="${flags[*]} $*" \
  --load-end "$load_end" "${render_args[@]}"
echo "wrote $root/docs/PERFORMANCE.md from $out"
