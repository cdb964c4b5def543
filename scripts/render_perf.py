#!/usr/bin/env python3
"""Renders docs/PERFORMANCE.md from bench_dvm's JSON output (Google Benchmark).

    scripts/render_perf.py build/bench.json docs/PERFORMANCE.md [--repo DIR] [--args "..."]
                           [--load-end "1.0 0.9 0.8"] [--note "..."]

Uses the "median" aggregate of every benchmark when the run had repetitions,
else the median over the plain runs of the same name. Every ratio on the page
comes from figures of the same run. Python 3 stdlib only.
"""

import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys

# The line under a hand-written section's heading: render keeps such sections.
HAND_WRITTEN_MARK = "*Written by hand, not by `scripts/render_perf.py`"

TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

WORKLOADS = [
    ("W1_chain", "y = relu(x*a + b) * 0.5 + x; x, a, b of one shape"),
    ("W2_gelu", "y = 0.5*x*(1 + tanh(0.7978845608*(x + 0.044715*x^3)))"),
    ("W3_softmax", "softmax over the last axis of [rows, 1024]"),
    ("W4_layernorm", "layernorm over the last axis of [rows, 1024], eps 1e-5, weight and bias [1024]"),
    ("W5_bias_tanh", "tanh(x + bias); x [rows, 1024], bias [1024] broadcast"),
    ("W6_rowsum", "sum over the last axis of [rows, 1024]"),
]
W_IDS = [w.split("_")[0] for w, _ in WORKLOADS]
SYSTEM_ORDER = ["dvm", "dvm_jit", "dvm_interp", "fused_loop", "libtorch"]
SMALL, MEDIUM, LARGE = 4096, 1048576, 16777216
# Benchmarks on several threads use the wall clock (->UseRealTime()), and
# Google Benchmark appends "/real_time" to their names.
REAL_TIME_SUFFIX = re.compile(r"/real_time$")
THREADS_RE = re.compile(r"/threads:(\d+)$")
WORKLOAD_RE = re.compile(r"^(W[1-6]_[a-z_]+)/([a-z_]+)/(\d+)(?:/threads:(\d+))?$")
TRIAD_RE = re.compile(r"^bandwidth/triad/(\d+)(?:/threads:(\d+))?$")


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = {}  # name -> plain entries
    medians, cvs, errors = {}, {}, {}
    for b in data.get("benchmarks", []):
        name = REAL_TIME_SUFFIX.sub("", b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = dict(b)
            elif b.get("aggregate_name") == "cv":
                cvs[name] = b
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
        threads = THREADS_RE.search(name)
        m["threads"] = int(threads.group(1)) if threads else 1
        m["ns"] = m["cpu_ns"] if m["threads"] == 1 else m["wall_ns"]
        cv = cvs.get(name)
        if cv:
            m["cv"] = cv["cpu_time"] if m["threads"] == 1 else cv["real_time"]
        if m.get("bytes") and m["ns"] > 0:
            m["bps"] = m["bytes"] / (m["ns"] * 1e-9)
            if m.get("triad_bytes_per_second"):
                m["pct"] = 100.0 * m["bps"] / m["triad_bytes_per_second"]
        else:
            m["bps"] = m.get("bytes_per_second")
            m["pct"] = m.get("pct_bw")
    reps = max((b.get("repetitions", 1) for b in data.get("benchmarks", [])), default=1)
    return data.get("context", {}), medians, errors, reps


# ---- formatting ---------------------------------------------------------------


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


def fmt_ratio(v):
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_pct(v):
    return "–" if v is None else f"{100 * v:.1f}%"


def fmt_size(n):
    return f"{int(n):,}"


def size_label(n):
    return {SMALL: "4K", MEDIUM: "1M", LARGE: "16M"}.get(int(n), fmt_size(n))


def ratio(a, b):
    return a / b if a is not None and b and b > 0 else None


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


def tier_of(m):
    share = m.get("on_jit")
    if share is None:
        return "–"
    if share >= 1.0:
        return "jit"
    if share <= 0.0:
        return "interp"
    return f"{100 * share:.0f}% jit"


# ---- indexing -------------------------------------------------------------------


def workload_index(medians):
    """{(w_id, system, size, threads): median}"""
    idx = {}
    for name, m in medians.items():
        g = WORKLOAD_RE.match(name)
        if g:
            w_id = g.group(1).split("_")[0]
            idx[(w_id, g.group(2), int(g.group(3)), int(g.group(4) or 1))] = m
    return idx


def triad_references(medians):
    """{threads: the triad bytes/s that pct_bw is relative to}"""
    refs = {}
    for m in medians.values():
        if m.get("triad_bytes_per_second"):
            refs.setdefault(m["threads"], []).append(m["triad_bytes_per_second"])
    return {t: statistics.median(v) for t, v in refs.items()}


def thread_counts(idx):
    return sorted({t for (_, _, _, t) in idx})


def t(idx, w, system, size, threads, wall=False):
    m = idx.get((w, system, size, threads))
    if not m:
        return None
    return m["wall_ns"] if wall else m["ns"]


# ---- sections -------------------------------------------------------------------


def summary(idx, medians, out, torch_default=None):
    if not idx and not medians:
        return
    counts = thread_counts(idx)
    many = max(counts) if counts else 1
    out.append("## Summary: the ratios the issues ask for\n")
    out.append("Every ratio below divides two medians of this same run. One-thread times are CPU "
               "time of the measuring thread; ratios between thread counts divide wall times, the "
               "only clock both sides share.\n")

    if idx:
        out.append("### dvm ÷ fused_loop, one thread\n")
        out.append("dvm's time over the hand-written fused loop's (-O3 -march=native) at the same size: "
                   "below 1 is faster than the loop. `dvm` is the default tiering, `dvm_jit` machine "
                   "code from the first call, `dvm_interp` the interpreter only.\n")
        sizes = sorted({s for (_, _, s, _) in idx})
        header = "| workload | " + " | ".join(f"dvm {size_label(s)} | dvm_jit {size_label(s)}" for s in sizes) + " |"
        out.append(header)
        out.append("| --- |" + " ---: |" * (2 * len(sizes)))
        for w in W_IDS:
            cells = []
            for s in sizes:
                f = t(idx, w, "fused_loop", s, 1)
                cells += [fmt_ratio(ratio(t(idx, w, "dvm", s, 1), f)),
                          fmt_ratio(ratio(t(idx, w, "dvm_jit", s, 1), f))]
            out.append(f"| {w} | " + " | ".join(cells) + " |")
        out.append("")

    if idx and many > 1:
        out.append(f"### Threads: {many} threads against 1\n")
        out.append(f"Speedup = wall time at 1 thread ÷ wall time at {many} threads (above 1: the "
                   f"threads help). At 4,096 elements every launch is small: dvm runs it on the "
                   f"calling thread whatever the thread count (under ~64K elements), so the ratio "
                   f"there should stay near 1 (the 4K column shows time at {many} ÷ time at 1, "
                   f"below or near 1 is good). `cores busy` is process CPU time over wall time "
                   f"in the {many}-thread timed loop: near {many} when both cores worked, near 1 "
                   f"when the machine gave the run only one.\n")
        systems = [s for s in SYSTEM_ORDER if any(k[1] == s for k in idx)]
        headline = ratio(t(idx, "W1", "dvm", MEDIUM, 1, wall=True), t(idx, "W1", "dvm", MEDIUM, many, wall=True))
        if headline is not None:
            busy = idx.get(("W1", "dvm", MEDIUM, many), {}).get("cores_busy")
            out.append(f"**W1 at 1M, dvm: {fmt_ratio(headline)}× faster on {many} threads** "
                       f"(cores busy {fmt_num(busy, 2)}).\n")
        out.append("| workload | system | 4K: time ×" + str(many) + " ÷ ×1 | 1M speedup | 16M speedup | "
                   "cores busy ×" + str(many) + " (1M / 16M) |")
        out.append("| --- | --- | ---: | ---: | ---: | ---: |")
        for w in W_IDS:
            for s in systems:
                if (w, s, MEDIUM, 1) not in idx:
                    continue
                small = ratio(t(idx, w, s, SMALL, many, wall=True), t(idx, w, s, SMALL, 1, wall=True))
                mid = ratio(t(idx, w, s, MEDIUM, 1, wall=True), t(idx, w, s, MEDIUM, many, wall=True))
                big = ratio(t(idx, w, s, LARGE, 1, wall=True), t(idx, w, s, LARGE, many, wall=True))
                busy = "/".join(fmt_num(idx.get((w, s, n, many), {}).get("cores_busy"), 2) for n in (MEDIUM, LARGE))
                out.append(f"| {w} | {s} | {fmt_ratio(small)} | {fmt_ratio(mid)} | {fmt_ratio(big)} | {busy} |")
        out.append("")

    if any(k[1] == "libtorch" for k in idx):
        out.append("### dvm against libtorch, one thread\n")
        out.append("libtorch's time ÷ dvm's (above 1: dvm is faster). The issue asks for W1–W5 at 1M; "
                   "the other sizes and W6 are shown beside them.\n")
        out.append("| workload | 4K | **1M** | 16M | libtorch 1M | dvm 1M |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        for w in W_IDS:
            cells = [fmt_ratio(ratio(t(idx, w, "libtorch", s, 1), t(idx, w, "dvm", s, 1))) for s in (SMALL, MEDIUM, LARGE)]
            cells[1] = f"**{cells[1]}**"
            out.append(f"| {w} | " + " | ".join(cells) + f" | {fmt_time(t(idx, w, 'libtorch', MEDIUM, 1))} | "
                       f"{fmt_time(t(idx, w, 'dvm', MEDIUM, 1))} |")
        out.append("")

    if torch_default:
        tidx = workload_index(torch_default)
        out.append("### dvm against libtorch with its own allocator, one thread\n")
        out.append("Short runs with `DVM_BENCH_TORCH_ALLOCATOR=default`, W1–W5 at 1M, each system "
                   "and workload alone in a fresh process, one after another: libtorch allocates "
                   "each op's output from malloc, as PyTorch does out of the box. Where glibc "
                   "returns those blocks to the kernel, the first write to each fresh page faults "
                   "(the faults column). glibc adapts its thresholds to what the process freed "
                   "before, so a process shared with other benchmarks made those faults depend on "
                   "the run order; alone in a fresh process is what a program using PyTorch for "
                   "that workload gets. The issue's reference figures name both allocators.\n")
        out.append("| workload | **libtorch ÷ dvm** | libtorch 1M | dvm 1M | libtorch faults per call |")
        out.append("| --- | ---: | ---: | ---: | ---: |")
        for w in W_IDS[:5]:
            lt, dv = t(tidx, w, "libtorch", MEDIUM, 1), t(tidx, w, "dvm", MEDIUM, 1)
            if lt is None or dv is None:
                continue
            faults = tidx[(w, "libtorch", MEDIUM, 1)].get("page_faults")
            out.append(f"| {w} | **{fmt_ratio(ratio(lt, dv))}** | {fmt_time(lt)} | {fmt_time(dv)} | "
                       f"{fmt_num(faults, 0)} |")
        out.append("")

    w7 = {s: medians.get(f"W7_op_stream/{s}/64") for s in ("dvm", "libtorch")}
    rec = medians.get("record/per_op")
    if any(w7.values()) or rec:
        out.append("### Cost per op (W7, record/per_op)\n")
        out.append("| figure | ns per op |")
        out.append("| --- | ---: |")
        how = {"dvm": "recorded, flushed, fused, launched", "libtorch": "eager, one op at a time"}
        for s, m in w7.items():
            if m:
                out.append(f"| W7 op stream, {s} ({how[s]}) | {fmt_num(m.get('ns_per_op'))} |")
        if w7.get("dvm") and w7.get("libtorch"):
            out.append(f"| libtorch ÷ dvm | {fmt_ratio(ratio(w7['libtorch'].get('ns_per_op'), w7['dvm'].get('ns_per_op')))} |")
        if rec:
            out.append(f"| record/per_op, dvm (recording alone) | {fmt_num(rec.get('ns_per_op'))} |")
        out.append("")

    first, second = medians.get("W8_dynamic/dvm/first"), medians.get("W8_dynamic/dvm/second")
    if first or second:
        out.append("### W8: new shapes\n")
        out.append("| kernels compiled, first pass | kernels compiled, second pass | first pass | second pass | first ÷ second |")
        out.append("| ---: | ---: | ---: | ---: | ---: |")
        cf = (first or second).get("compiles_first")
        cs = second.get("compiles_second") if second else None
        out.append(f"| {fmt_num(cf, 0)} | {fmt_num(cs, 0)} | {fmt_time(first['ns'] if first else None)} | "
                   f"{fmt_time(second['ns'] if second else None)} | "
                   f"{fmt_ratio(ratio(first['ns'] if first else None, second['ns'] if second else None))} |")
        out.append("")


def workload_tables(idx, out):
    if not idx:
        return
    out.append("## Workloads W1–W6\n")
    out.append("Median time per iteration over the repetitions: for one thread the measuring "
               "thread's CPU time (all the work runs on it, and preemption by other processes is "
               "left out), for more threads the wall clock; the wall time is shown beside it, and "
               "cv is the coefficient of variation of the time used over the repetitions. GB/s "
               "counts the bytes the math must read and write once (10^9 bytes/s) over that time; "
               "pct_bw is that as a percentage of the triad bandwidth measured in the same run with "
               "the same number of threads (16,777,216 floats, the best of 15 runs as STREAM reports): sizes that fit in the "
               "caches can exceed 100%. \"÷ fused_loop\" is the time divided by the hand-written "
               "fused loop's at the same size and threads (its parallel version on several "
               "threads): below 1 is faster than the loop. \"tier\" is where dvm's launches ran "
               "after warm-up (the kernel log of one untimed call). \"cores\" is process CPU time "
               "over wall time in the timed loop, \"faults\" minor page faults per iteration.\n")
    for w, desc in WORKLOADS:
        w_id = w.split("_")[0]
        keys = sorted({(s, th) for (ww, _, s, th) in idx if ww == w_id})
        if not keys:
            continue
        out.append(f"### {w}\n")
        out.append(f"{desc}.\n")
        out.append("| size | threads | system | tier | median time | wall time | cv | GB/s | pct_bw | "
                   "÷ fused_loop | cores | faults |")
        out.append("| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for size, threads in keys:
            fused = idx.get((w_id, "fused_loop", size, threads))
            systems = sorted({sys for (ww, sys, s, th) in idx if (ww, s, th) == (w_id, size, threads)},
                             key=lambda x: (SYSTEM_ORDER.index(x) if x in SYSTEM_ORDER else 99, x))
            for sys in systems:
                m = idx[(w_id, sys, size, threads)]
                gbs = m.get("bps")
                out.append(f"| {fmt_size(size)} | {threads} | {sys} | {tier_of(m)} | {fmt_time(m['ns'])} | "
                           f"{fmt_time(m['wall_ns'])} | {fmt_pct(m.get('cv'))} | "
                           f"{fmt_num(gbs / 1e9 if gbs else None)} | {fmt_num(m.get('pct'))} | "
                           f"{fmt_ratio(ratio(m['ns'], fused['ns'] if fused else None))} | "
                           f"{fmt_num(m.get('cores_busy'), 2)} | {fmt_num(m.get('page_faults'), 0)} |")
        out.append("")


def bandwidth_table(medians, out):
    rows = []
    for name, m in medians.items():
        g = TRIAD_RE.match(name)
        if g:
            rows.append((int(g.group(1)), int(g.group(2) or 1), name, m))
    if not rows:
        return
    out.append("## Memory bandwidth (STREAM triad)\n")
    out.append("`a[i] = b[i] + s*c[i]`, 12 bytes per element, -O3 -march=native; on several threads "
               "the same loop over pieces on a TBB arena (as the parallel fused loops).\n")
    out.append("| size | threads | median time | GB/s | pct_bw | cores |")
    out.append("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, threads, name, m in sorted(rows):
        gbs = m.get("bps")
        out.append(f"| {fmt_size(size)} | {threads} | {fmt_time(m['ns'])} | {fmt_num(gbs / 1e9 if gbs else None)} | "
                   f"{fmt_num(m.get('pct'))} | {fmt_num(m.get('cores_busy'), 2)} |")
    out.append("")


def op_cost_table(medians, out):
    names = [n for n in ("W7_op_stream/dvm/64", "W7_op_stream/libtorch/64", "record/per_op") if n in medians]
    if not names:
        return
    out.append("## Cost per recorded op\n")
    out.append("`W7_op_stream/<system>/64`: 100 chained elementwise ops (add/mul/sub, alternating a "
               "scalar and a second tensor) on 64 elements, recorded, flushed, fused and launched "
               "(libtorch: run eagerly, one op at a time): the time per op. `record/per_op`: "
               "recording alone (batches of 1000 ops; the flush runs with the clock paused).\n")
    out.append("| benchmark | median time per iteration | ns per op | faults |")
    out.append("| --- | ---: | ---: | ---: |")
    for n in names:
        m = medians[n]
        out.append(f"| `{n}` | {fmt_time(m['ns'])} | {fmt_num(m.get('ns_per_op'))} | "
                   f"{fmt_num(m.get('page_faults'), 0)} |")
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
               "kernels compiled, second pass | faults per pass |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for n in names:
        m = medians[n]
        shapes = m.get("shapes") or 50
        out.append(f"| `{n}` | {fmt_time(m['ns'])} | {fmt_time(m['ns'] / shapes)} | "
                   f"{fmt_num(m.get('compiles_first'), 0)} | "
                   f"{fmt_num(m.get('compiles_second'), 0) if 'compiles_second' in m else '–'} | "
                   f"{fmt_num(m.get('page_faults'), 0)} |")
    out.append("")


def compile_table(medians, errors, out):
    ids = sorted({n.split("/")[-1] for n in list(medians) + list(errors)
                  if n.startswith(("compile/", "fuser/"))})
    if not ids:
        return
    out.append("## Compile cost per kernel\n")
    out.append("From the recorded nodes of each workload: `fuser/miss` runs the partition pass "
               "(time per recorded op), `fuser/hit` what a plan-cache hit costs instead (the "
               "structural signature and the lookup, per op), `compile/encode` lowers the "
               "workload's kernel to fresh bytecode, `compile/verify` verifies that bytecode, "
               "`compile/jit` compiles the verified kernel to machine code for the active ISA "
               "(a fresh kernel each iteration, its code freed again inside the timing; the issue's "
               "target is ≤ 20 µs per kernel, its goal ≤ 5 µs).\n")
    out.append("| workload | ops | fuser/miss per op | fuser/hit per op | encode | verify | jit | jit ISA | "
               "machine code bytes | bytecode bytes | instructions | groups |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for w in ids:
        miss = medians.get(f"fuser/miss/{w}", {})
        hit = medians.get(f"fuser/hit/{w}", {})
        enc = medians.get(f"compile/encode/{w}", {})
        ver = medians.get(f"compile/verify/{w}", {})
        jit = medians.get(f"compile/jit/{w}", {})
        jit_time = fmt_time(jit.get("ns")) if jit else (
            f"skipped: {errors[f'compile/jit/{w}']}" if f"compile/jit/{w}" in errors else "–")
        ops = miss.get("ops", enc.get("ops"))
        out.append(f"| {w} | {fmt_num(ops, 0)} | {fmt_time(miss.get('ns_per_op'))} | "
                   f"{fmt_time(hit.get('ns_per_op'))} | {fmt_time(enc.get('ns'))} | {fmt_time(ver.get('ns'))} | "
                   f"{jit_time} | {jit.get('label') or '–'} | {fmt_num(jit.get('code_bytes'), 0)} | "
                   f"{fmt_num(enc.get('bytecode_bytes', ver.get('bytecode_bytes')), 0)} | "
                   f"{fmt_num(ver.get('instructions'), 0)} | {fmt_num(miss.get('groups', enc.get('groups')), 0)} |")
    out.append("")


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def contraction_tables(medians, out):
    """matmul, linear_gelu and matmul_dynamic (bench/matmul.cpp) against the
    FMA roof (peak/fma) and the reference libraries, per thread count."""
    rows = {}  # (kind, shape, threads) -> {system: gflops}
    for n, m in medians.items():
        parts = n.split("/")
        if parts[0] in ("matmul", "linear_gelu") and len(parts) == 4 and "gflops" in m:
            rows.setdefault((parts[0], parts[1], m["threads"]), {})[parts[2]] = m["gflops"]
    if not rows:
        return
    peak = {m["threads"]: m["gflops"] for n, m in medians.items() if n.startswith("peak/fma/") and "gflops" in m}
    out.append("## Contractions (the cube unit)\n")
    out.append("GFLOP/s (2 M K N per product). dvm runs the public API (`matmul`, `gelu(linear(x, W, b))`); "
               "linear_gelu's dvm holds W as a tensor (as a model holds its weights: it gets a row-major "
               "copy, docs/API.md, \"Weights read by columns\"), `dvm_rewrap` wraps W anew on every call; "
               "`openblas` is cblas_sgemm (one per matrix of a batch), `onednn` a matmul primitive created "
               "once (with bias and a gelu_tanh post-op for linear_gelu), `onednn_new_shape` creates it inside "
               "the timed loop, `libtorch` is torch::matmul or gelu(linear) with tanh. Shapes B×M×K×N are "
               "batched (attention's [48, S, 64] × [48, 64, S]). "
               + (f"FMA roof (peak/fma): {', '.join(f'{peak[t]:.1f} GFLOP/s on {t} thread' + ('s' if t != 1 else '') for t in sorted(peak))}." if peak else "")
               + "\n")
    for kind, wanted in (("matmul", ("openblas", "onednn", "libtorch")),
                         ("linear_gelu", ("dvm_rewrap", "onednn", "onednn_new_shape", "libtorch"))):
        keys = sorted({(s, t) for (k, s, t) in rows if k == kind},
                      key=lambda st: (st[1], len(st[0].split("x")), [int(x) for x in st[0].split("x")]))
        if not keys:
            continue
        refs = [r for r in wanted if any(r in rows[(kind, s, t)] for s, t in keys)]
        out.append(f"### {kind}\n")
        out.append("| (B×)M×K×N | threads | dvm | " + " | ".join(refs) + " | " +
                   " | ".join(f"dvm ÷ {r}" for r in refs) + " | dvm % of roof |")
        out.append("| --- | ---: | ---: | " + " | ".join(["---:"] * (2 * len(refs))) + " | ---: |")
        ratios = {r: {} for r in refs}
        for s, t in keys:
            g = rows[(kind, s, t)]
            dv = g.get("dvm")
            cells = [fmt_num(g.get(r)) for r in refs]
            rs = []
            for r in refs:
                q = ratio(dv, g.get(r)) if dv and g.get(r) else None
                rs.append(fmt_ratio(q) if q else "–")
                if q:
                    ratios[r].setdefault(t, []).append(q)
            roof = f"{100 * dv / peak[t]:.0f} %" if dv and peak.get(t) else "–"
            out.append(f"| {s} | {t} | {fmt_num(dv)} | " + " | ".join(cells) + " | " + " | ".join(rs) + f" | {roof} |")
        out.append("")
        for r in refs:
            for t in sorted(ratios[r]):
                out.append(f"- dvm ÷ {r}, {t} thread{'s' if t != 1 else ''}: geomean "
                           f"{fmt_ratio(geomean(ratios[r][t]))}, min {fmt_ratio(min(ratios[r][t]))}")
        out.append("")
    dyn = sorted(n for n in medians if n.startswith("matmul_dynamic/"))
    if dyn:
        out.append("### matmul_dynamic (50 pseudo-random M in [1, 512], K = N = 768)\n")
        out.append("| system | GFLOP/s | compiles, first pass | compiles, second pass |")
        out.append("| --- | ---: | ---: | ---: |")
        for n in dyn:
            m = medians[n]
            out.append(f"| {n.split('/')[1]} | {fmt_num(m.get('gflops'))} | "
                       f"{fmt_num(m.get('compiles_first'), 0) if 'compiles_first' in m else '–'} | "
                       f"{fmt_num(m.get('compiles_second'), 0) if 'compiles_second' in m else '–'} |")
        out.append("")


def other_table(medians, errors, out):
    known = re.compile(r"^(W[1-8]_|bandwidth/|record/|compile/|fuser/|matmul/|linear_gelu/|matmul_dynamic/|peak/fma/)")
    names = sorted(n for n in medians if not known.match(n))
    skipped = sorted(n for n in errors if not n.startswith("compile/jit/"))
    if names:
        out.append("## Other benchmarks\n")
        out.append("| benchmark | median time | counters |")
        out.append("| --- | ---: | --- |")
        skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
                "aggregate_name", "aggregate_unit", "iterations", "real_time", "cpu_time", "time_unit",
                "family_index", "per_family_instance_index", "ns", "wall_ns", "cpu_ns"}
        for n in names:
            m = medians[n]
            counters = ", ".join(f"{k}={v:.4g}" for k, v in m.items()
                                 if k not in skip and isinstance(v, (int, float)) and not isinstance(v, bool))
            out.append(f"| `{n}` | {fmt_time(m['ns'])} | {counters} |")
        out.append("")
    if skipped:
        out.append("## Skipped or failed\n")
        for n in skipped:
            out.append(f"- `{n}`: {errors[n]}")
        out.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("output")
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--args", default="", help="the arguments bench_dvm ran with (shown in the page)")
    ap.add_argument("--load-end", default="", help="the load average when the run ended (/proc/loadavg)")
    ap.add_argument("--note", action="append", default=[], help="a line for the page's notes (repeatable)")
    ap.add_argument("--torch-default", action="append", default=[],
                    help="JSON of a run with DVM_BENCH_TORCH_ALLOCATOR=default (libtorch's own "
                         "allocator; repeatable: one process per workload)")
    opts = ap.parse_args()

    context, medians, errors, reps = load(opts.json)
    idx = workload_index(medians)
    model, cpus, cores, tpc, isa = machine()
    triads = triad_references(medians)

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
    if context.get("thread_counts"):
        out.append(f"- Thread counts: {context['thread_counts'].replace(',', ' and ')} "
                   "(1 and all cores, std::thread::hardware_concurrency())")
    for th in sorted(triads):
        out.append(f"- Triad bandwidth, {th} thread{'s' if th != 1 else ''} (the pct_bw reference): "
                   f"{triads[th] / 1e9:.1f} GB/s")
    if context.get("libtorch"):
        out.append(f"- libtorch: {context['libtorch']}")
    if context.get("page_fault_ns"):
        out.append(f"- One minor page fault (first write to a fresh 4 KiB page): "
                   f"{float(context['page_fault_ns']) / 1e3:.1f} µs on this machine")
    if context.get("library_build_type") == "debug":
        out.append("- Note: the Google Benchmark library itself was built as debug (Debian's "
                   "package); it only affects the harness's own overhead.")
    load_avg = context.get("load_avg")
    if load_avg:
        out.append(f"- Load average at start: {', '.join(f'{v:.2f}' for v in load_avg)}"
                   + (f"; at the end: {', '.join(opts.load_end.split()[:3])}" if opts.load_end else ""))
    out.append("")
    out.append("Noise: every figure is the median of the repetitions (cv in the tables is their "
               "spread). One-thread times are the measuring thread's CPU time, which leaves out the "
               "time other processes took the core; several-thread times, and every ratio between "
               "thread counts, are wall-clock time, which does not: on this shared 2-core machine "
               "they move most when something else runs (a low `cores` figure in a 2-thread row "
               "says the run lost a core)."
               + (" The repetitions of all benchmarks ran interleaved in random order "
                  "(--benchmark_enable_random_interleaving), so a stretch of such noise spoils "
                  "one repetition of many benchmarks, which their medians leave out, rather than "
                  "every repetition of a few." if "random_interleaving=true" in opts.args else ""))
    for note in opts.note:
        out.append("")
        out.append(note)
    out.append("")

    torch_default = {}
    for path in opts.torch_default:
        torch_default.update(load(path)[1])
    summary(idx, medians, out, torch_default)
    workload_tables(idx, out)
    bandwidth_table(medians, out)
    op_cost_table(medians, out)
    dynamic_table(medians, out)
    compile_table(medians, errors, out)
    contraction_tables(medians, out)
    other_table(medians, errors, out)

    # Sections written by hand (from HAND_WRITTEN_MARK's heading to the end)
    # are kept from the file being replaced.
    kept = ""
    if os.path.exists(opts.output):
        with open(opts.output) as f:
            old = f.read()
        at = old.find(HAND_WRITTEN_MARK)
        if at >= 0:
            start = old.rfind("\n## ", 0, at)
            kept = old[start + 1 if start >= 0 else at:]
    os.makedirs(os.path.dirname(os.path.abspath(opts.output)), exist_ok=True)
    with open(opts.output, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")
        if kept:
            f.write("\n" + kept.rstrip() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
