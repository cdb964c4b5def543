#!/usr/bin/env bash
# Compares two builds of bench_dvm in one session: runs them alternately
# (old, new, old, new, ...) so that a noisy minute on this shared machine hits
# both, and prints per benchmark the median time of each build over every
# repetition and the ratio new / old (above 1: the new build is slower).
#
#   scripts/compare_builds.sh OLD/bench_dvm NEW/bench_dvm [bench_dvm arguments]
#
# ROUNDS (default 3) alternations, each with REPETITIONS (default 3)
# repetitions per benchmark. The default filter is every dvm figure of
# WORKLOADS.md and the compile, record and fuser costs.
set -euo pipefail
old="$1" new="$2"
shift 2
rounds="${ROUNDS:-3}" reps="${REPETITIONS:-3}"
out="$(mktemp -d)"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--benchmark_filter='^(W[1-8]_[a-z_]+/dvm|compile/|record/|fuser/)')
for r in $(seq 1 "$rounds"); do
  for side in old new; do
    bin="$old"; [ "$side" = new ] && bin="$new"
    "$bin" "${args[@]}" --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
      --benchmark_out="$out/$side.$r.json" --benchmark_out_format=json >/dev/null 2>&1
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, glob
out, rounds = sys.argv[1], int(sys.argv[2])
times = {"old": {}, "new": {}}
for side in times:
    for path in glob.glob(f"{out}/{side}.*.json"):
        for b in json.load(open(path))["benchmarks"]:
            if b.get("run_type") != "iteration" or b.get("error_occurred"):
                continue
            t = b["real_time"] if "real_time" in b["name"] else b["cpu_time"]
            times[side].setdefault(b["run_name"], []).append(t * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]])
names = [n for n in times["old"] if n in times["new"]]
ratios = []
print(f"{'benchmark':58s} {'old':>12s} {'new':>12s} {'new/old':>8s}")
for n in names:
    o, w = statistics.median(times["old"][n]), statistics.median(times["new"][n])
    ratios.append(w / o)
    flag = "  <-- over 1.05" if w / o > 1.05 else ""
    print(f"{n:58s} {o:12.1f} {w:12.1f} {w / o:8.3f}{flag}")
print(f"\n{len(names)} benchmarks, {rounds} alternations; ratio new/old: median {statistics.median(ratios):.3f}, "
      f"min {min(ratios):.3f}, max {max(ratios):.3f}; times in ns")
PY
rm -rf "$out"
