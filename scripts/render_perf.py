#!/usr/bin/env python3
"""Renders docs/PERFORMANCE.md from bench_dvm's JSON output (Google Benchmark).

    scripts/render_perf.py build/bench.json docs/PERFORMANCE.md [--repo DIR] [--args "..."]

Uses the "median" aggregate of every benchmark when the run had repetitions,
else the median over the plain runs of the same name. Python 3 stdlib only.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

WORKLOADS = [
    ("W1_chain", "y = relu(x*a + b) * 0.5 + x; x, a, b of one shape"),
    ("W2_gelu", "y = 0.5*x*(1 + tanh(0.7978845608*(x + 0.044715*x^3)))"),
    ("W3_softmax", "softmax over the last axis of [rows, 1024]"),
    ("W4_layernorm", "layernorm over the last axis of [rows, 1024], eps 1e-5, weight and bias [1024]"),
    ("W5_bias_tanh", "tanh(x + bias); x [rows, 1024], bias [1024] broadcast"),
    ("W6_rowsum", "sum over the last axis of [rows, 1024]"),
]
SYSTEM_ORDER = ["dvm", "dvm_jit", "dvm_interp", "fused_loop", "libtorch"]
WORKLOAD_RE = re.compile(r"^(W[1-6]_[a-z_]+)/([a-z_]+)/(\d+)(?:/threads:(\d+))?$")


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = {}  # run_name -> list of entries
    medians = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
            continue
        if b.get("error_occurred"):
            continue
        runs.setdefault(name, []).append(b)
    # Runs without repetitions: the median of the plain entries, field by field.
    for name, entries in runs.items():
        if name in medians:
            continue
        m = dict(entries[0])
        for key, value in entries[0].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                m[key] = statistics.median(e[key] for e in entries if key in e)
        medians[name] = m
    for name, m in medians.items():
        unit = TO_NS.get(m.get("time_unit", "ns"), 1.0)
        m["wall_ns"] = m["real_time"] * unit
        m["cpu_ns"] = m["cpu_time"] * unit
        # The time reported: single-thread runs do all their work on the
        # measuring thread, so its CPU time is the work's time and leaves out
        # preemption by other processes (Google Benchmark's default, and what
        # its rate counters use). Runs on several threads use the wall clock.
        threads = re.search(r"/threads:(\d+)$", name)
        m["threads"] = int(threads.group(1)) if threads else 1
        m["ns"] = m["cpu_ns"] if m["threads"] == 1 else m["wall_ns"]
        if m.get("bytes") and m["ns"] > 0:
            m["bps"] = m["bytes"] / (m["ns"] * 1e-9)
            if m.get("triad_bytes_per_second"):
                m["pct"] = 100.0 * m["bps"] / m["triad_bytes_per_second"]
        else:
            m["bps"] = m.get("bytes_per_second")
            m["pct"] = m.get("pct_bw")
    reps = max((b.get("repetitions", 1) for b in data.get("benchmarks", [])), default=1)
    return data.get("context", {}), medians, reps


def fmt_time(ns):
    if ns is None:
        return "–"
    if ns < 1e3:
        return f"{ns:.1f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


def fmt_num(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"


def fmt_size(n):
    n = int(n)
    return f"{n:,}"


def run(cmd, cwd=None):
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine():
    model, cpus, cores, threads = "", "", "", ""
    for line in run(["lscpu"]).splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Model name" and not model:
            model = value
        elif key == "CPU(s)":
            cpus = value
        elif key == "Core(s) per socket":
            cores = value
        elif key == "Thread(s) per core":
            threads = value
    if not model and os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    flags = run(["sh", "-c", "grep -m1 -o -w -e avx512f -e avx2 /proc/cpuinfo | sort -u | tr '\\n' ' '"])
    return model or "unknown CPU", cpus or str(os.cpu_count()), cores, threads, flags.strip()


def git_commit(repo):
    sha = run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo)
    if not sha:
        return "unknown"
    dirty = run(["git", "status", "--porcelain"], cwd=repo)
    return sha + (" (with uncommitted changes)" if dirty else "")


def triad_reference(medians):
    """The triad bytes/s that pct_bw is relative to."""
    refs = [m.get("triad_bytes_per_second") or m["bytes_per_second"] * 100.0 / m["pct_bw"]
            for name, m in medians.items()
            if m.get("pct_bw") and m.get("bytes_per_second")]
    return statistics.median(refs) if refs else None


def tier_of(m):
    share = m.get("on_jit")
    if share is None:
        return "–"
    if share >= 1.0:
        return "jit"
    if share <= 0.0:
        return "interp"
    return f"{100 * share:.0f}% jit"


def workload_tables(medians, out):
    rows = {}
    for name, m in medians.items():
        g = WORKLOAD_RE.match(name)
        if g:
            w, system, size, threads = g.group(1), g.group(2), int(g.group(3)), int(g.group(4) or 1)
            rows.setdefault(w, {})[(size, threads, system)] = m
    if not rows:
        return
    out.append("## Workloads W1–W6\n")
    out.append("Median time per iteration over the repetitions: for one thread the measuring "
               "thread's CPU time (all the work runs on it, and preemption by other processes is "
               "left out), for more threads the wall clock; the wall time is shown beside it. "
               "GB/s counts the bytes the math must read and write once (10^9 bytes/s) over that "
               "time; pct_bw is that as a percentage of the triad bandwidth measured in the same "
               "run (16,777,216 floats, single thread, median of 15): sizes that fit in the caches "
               "can exceed 100%. \"÷ fused_loop\" is the time divided by the hand-written fused "
               "loop's at the same size and threads: below 1 is faster than the loop. \"tier\" is "
               "where dvm's launches ran after warm-up (the kernel log of one untimed call).\n")
    for w, desc in WORKLOADS:
        if w not in rows:
            continue
        table = rows[w]
        out.append(f"### {w}\n")
        out.append(f"{desc}.\n")
        out.append("| size | threads | system | tier | median time | wall time | GB/s | pct_bw | ÷ fused_loop |")
        out.append("| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        keys = sorted({(s, t) for (s, t, _) in table})
        for size, threads in keys:
            fused = table.get((size, threads, "fused_loop"))
            systems = sorted({sys for (s, t, sys) in table if (s, t) == (size, threads)},
                             key=lambda x: (SYSTEM_ORDER.index(x) if x in SYSTEM_ORDER else 99, x))
            for sys in systems:
                m = table[(size, threads, sys)]
                ratio = m["ns"] / fused["ns"] if fused and fused["ns"] > 0 else None
                gbs = m.get("bps")
                out.append(f"| {fmt_size(size)} | {threads} | {sys} | {tier_of(m)} | {fmt_time(m['ns'])} | "
                           f"{fmt_time(m['wall_ns'])} | "
                           f"{fmt_num(gbs / 1e9 if gbs else None)} | {fmt_num(m.get('pct'))} | "
                           f"{fmt_num(ratio, 2)} |")
        out.append("")


def bandwidth_table(medians, out):
    names = sorted((n for n in medians if n.startswith("bandwidth/")),
                   key=lambda n: [int(p) if p.isdigit() else p for p in n.split("/")])
    if not names:
        return
    out.append("## Memory bandwidth (STREAM triad)\n")
    out.append("`a[i] = b[i] + s*c[i]`, 12 bytes per element, single thread, -O3 -march=native.\n")
    out.append("| benchmark | median time | GB/s | pct_bw |")
    out.append("| --- | ---: | ---: | ---: |")
    for n in names:
        m = medians[n]
        gbs = m.get("bps")
        out.append(f"| `{n}` | {fmt_time(m['ns'])} | {fmt_num(gbs / 1e9 if gbs else None)} | "
                   f"{fmt_num(m.get('pct'))} |")
    out.append("")


def op_cost_table(medians, out):
    names = [n for n in ("W7_op_stream/dvm/64", "record/per_op") if n in medians]
    if not names:
        return
    out.append("## Cost per recorded op\n")
    out.append("`W7_op_stream/dvm/64`: 100 chained elementwise ops (add/mul/sub, alternating a scalar "
               "and a second tensor) on 64 elements, recorded, flushed, fused and launched: the "
               "time per op. `record/per_op`: recording alone (batches of 1000 ops; the flush runs "
               "with the clock paused).\n")
    out.append("| benchmark | median time per iteration | ns per op |")
    out.append("| --- | ---: | ---: |")
    for n in names:
        m = medians[n]
        out.append(f"| `{n}` | {fmt_time(m['ns'])} | {fmt_num(m.get('ns_per_op'))} |")
    out.append("")


def dynamic_table(medians, out):
    names = [n for n in ("W8_dynamic/dvm/first", "W8_dynamic/dvm/second") if n in medians]
    if not names:
        return
    out.append("## W8: dynamic shapes\n")
    out.append("W1 over a fixed seeded sequence of 50 lengths between 1,024 and 65,536. `first` "
               "starts every pass from empty caches; `second` is a pass after one over the same "
               "lengths (it must compile nothing).\n")
    out.append("| benchmark | median time per pass | per shape | kernels compiled, first pass | "
               "kernels compiled, second pass |")
    out.append("| --- | ---: | ---: | ---: | ---: |")
    for n in names:
        m = medians[n]
        shapes = m.get("shapes") or 50
        out.append(f"| `{n}` | {fmt_time(m['ns'])} | {fmt_time(m['ns'] / shapes)} | "
                   f"{fmt_num(m.get('compiles_first'), 0)} | "
                   f"{fmt_num(m.get('compiles_second'), 0) if 'compiles_second' in m else '–'} |")
    out.append("")


def compile_table(medians, out):
    ids = sorted({n.split("/")[-1] for n in medians
                  if n.startswith(("compile/", "fuser/"))})
    if not ids:
        return
    out.append("## Compile cost per kernel\n")
    out.append("From the recorded nodes of each workload: `fuser/miss` runs the partition pass "
               "(time per recorded op), `fuser/hit` what a plan-cache hit costs instead (the "
               "structural signature and the lookup, per op), `compile/encode` lowers the "
               "workload's kernel to fresh bytecode, `compile/verify` verifies that bytecode.\n")
    out.append("| workload | ops | fuser/miss per op | fuser/hit per op | encode | verify | "
               "bytecode bytes | instructions | groups |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for w in ids:
        miss = medians.get(f"fuser/miss/{w}", {})
        hit = medians.get(f"fuser/hit/{w}", {})
        enc = medians.get(f"compile/encode/{w}", {})
        ver = medians.get(f"compile/verify/{w}", {})
        ops = miss.get("ops", enc.get("ops"))
        per_op = miss.get("ns_per_op")
        out.append(f"| {w} | {fmt_num(ops, 0)} | {fmt_time(per_op)} | {fmt_time(hit.get('ns_per_op'))} | "
                   f"{fmt_time(enc.get('ns'))} | "
                   f"{fmt_time(ver.get('ns'))} | "
                   f"{fmt_num(enc.get('bytecode_bytes', ver.get('bytecode_bytes')), 0)} | "
                   f"{fmt_num(ver.get('instructions'), 0)} | {fmt_num(miss.get('groups', enc.get('groups')), 0)} |")
    out.append("")


def other_table(medians, out):
    known = re.compile(r"^(W[1-8]_|bandwidth/|record/|compile/|fuser/)")
    names = sorted(n for n in medians if not known.match(n))
    if not names:
        return
    out.append("## Other benchmarks\n")
    out.append("| benchmark | median time | counters |")
    out.append("| --- | ---: | --- |")
    skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
            "aggregate_name", "aggregate_unit", "iterations", "real_time", "cpu_time", "time_unit",
            "family_index", "per_family_instance_index", "ns"}
    for n in names:
        m = medians[n]
        counters = ", ".join(f"{k}={v:.4g}" for k, v in m.items()
                             if k not in skip and isinstance(v, (int, float)))
        out.append(f"| `{n}` | {fmt_time(m['ns'])} | {counters} |")
    out.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("output")
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--args", default="", help="the arguments bench_dvm ran with (shown in the page)")
    opts = ap.parse_args()

    context, medians, reps = load(opts.json)
    model, cpus, cores, tpc, isa = machine()
    triad = triad_reference(medians)

    out = ["# dvm performance", ""]
    out.append("Generated by `scripts/bench.sh` (bench/ → `bench_dvm`, rendered by "
               "`scripts/render_perf.py`); the workloads are defined in "
               "shared/bench/WORKLOADS.md. Do not edit by hand.\n")
    out.append(f"- Machine: {model}, {cpus} CPUs"
               + (f" ({cores} cores per socket, {tpc} threads per core)" if cores else "")
               + (f", {isa}" if isa else "")
               + f"; {context.get('mhz_per_cpu', '?')} MHz")
    out.append(f"- Date: {context.get('date') or datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    out.append(f"- Commit: {git_commit(opts.repo)}")
    extra = f" {opts.args}" if opts.args.strip() else ""
    out.append(f"- Run: `bench_dvm{extra}`, {reps} repetition{'s' if reps != 1 else ''} per benchmark")
    if triad:
        out.append(f"- Triad bandwidth (the pct_bw reference, single thread): {triad / 1e9:.1f} GB/s")
    if context.get("libtorch"):
        out.append(f"- libtorch: {context['libtorch']}")
    if context.get("library_build_type") == "debug":
        out.append("- Note: the Google Benchmark library itself was built as debug (Debian's "
                   "package); it only affects the harness's own overhead.")
    load_avg = context.get("load_avg")
    if load_avg:
        out.append(f"- Load average at start: {', '.join(f'{v:.2f}' for v in load_avg)}")
    out.append("- Times are medians of the repetitions; single-thread times are CPU time of the "
               "measuring thread (see below).")
    out.append("")

    workload_tables(medians, out)
    bandwidth_table(medians, out)
    op_cost_table(medians, out)
    dynamic_table(medians, out)
    compile_table(medians, out)
    other_table(medians, out)

    os.makedirs(os.path.dirname(os.path.abspath(opts.output)), exist_ok=True)
    with open(opts.output, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
