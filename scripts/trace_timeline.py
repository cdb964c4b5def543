#!/usr/bin/env python3
"""Draws a dvm profile (Chrome trace-event JSON from dvm::profile_end) as a
timeline in Graphviz: one lane per thread, nested events stacked below the
event that holds them, one colour per category. Prints the DOT; render it
with `neato -n2 -Tpng` (positions are fixed, in points).

Usage: scripts/trace_timeline.py trace.json > timeline.dot
       neato -n2 -Tpng timeline.dot -o timeline.png
"""
import json
import sys

WIDTH = 1400.0    # points for the whole profile
LEFT = 150.0      # lane labels
ROW = 22.0        # one nesting level
COLOURS = {"flush": "#9db9e6", "fuser": "#f2c57c", "launch": "#8fd18f", "jit": "#e08f8f"}


def main():
    trace = json.load(open(sys.argv[1]))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    if not events:
        sys.exit("no complete events in " + sys.argv[1])
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    scale = WIDTH / max(t1 - t0, 1e-9)
    out = ['digraph timeline {', '  node [shape=box, style=filled, fixedsize=true, fontname="Helvetica", '
           'fontsize=8, penwidth=0.5];']
    y = 0.0
    for tid in sorted({e["tid"] for e in events}):
        lane = sorted((e for e in events if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"]))
        stack, depth = [], {}
        for i, e in enumerate(lane):  # nesting depth: events still open when this one starts
            while stack and stack[-1][0] <= e["ts"] + 1e-9:
                stack.pop()
            depth[i] = len(stack)
            stack.append((e["ts"] + e["dur"], i))
        rows = max(depth.values()) + 1
        top = y
        out.append('  lane%d [shape=plaintext, style="", fixedsize=false, fontsize=10, label="%s", pos="%f,%f!"];'
                   % (tid, names.get(tid, "thread %d" % tid), LEFT / 2, -(top + rows * ROW / 2)))
        for i, e in enumerate(lane):
            w = max(e["dur"] * scale, 0.8)
            x = LEFT + (e["ts"] - t0) * scale + w / 2
            cy = -(top + depth[i] * ROW + ROW / 2)
            label = e["name"] if w > 7 * len(e["name"]) * 0.6 else ""
            out.append('  e%d_%d [label="%s", width=%f, height=%f, fillcolor="%s", pos="%f,%f!"];'
                       % (tid, i, label, w / 72, (ROW - 4) / 72, COLOURS.get(e["cat"], "#cccccc"), x, cy))
        y += rows * ROW + 14
    # A time axis under the lanes.
    span = t1 - t0
    step = 10 ** len(str(int(span / 5))) / 10 if span >= 5 else 1
    while span / step > 8:
        step *= 2
    t = 0.0
    while t <= span:
        out.append('  tick%d [shape=plaintext, style="", fixedsize=false, fontsize=9, label="%g us", pos="%f,%f!"];'
                   % (int(t / step), t, LEFT + t * scale, -(y + 6)))
        t += step
    for k, (cat, colour) in enumerate(COLOURS.items()):  # the legend: one box per category
        out.append('  legend%d [label="%s", width=%f, height=%f, fillcolor="%s", pos="%f,%f!"];'
                   % (k, cat, 60 / 72, (ROW - 4) / 72, colour, LEFT + k * 70 + 30, -(y + 30)))
    out.append('}')
    print("\n".join(out))


if __name__ == "__main__":
    main()
