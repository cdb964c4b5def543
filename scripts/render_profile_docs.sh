#!/usr/bin/env bash
# Renders the images of docs/EMBEDDING.md, "Profiling", from the profile
# example (examples/profile.cpp): a trace file, its timeline and the fusion
# of the last flush. Needs Graphviz (dot, neato: apt-get install graphviz);
# nothing in the build or the tests does.
#
# Usage: scripts/render_profile_docs.sh [build dir] (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build=${1:-"$root/build"}
out="$root/docs/images"
mkdir -p "$out"
"$build/examples/dvm_profile" "$out/profile_trace.json" "$out/fusion.dot"
dot -Tpng "$out/fusion.dot" -o "$out/fusion.png"
python3 "$root/scripts/trace_timeline.py" "$out/profile_trace.json" >"$out/profile_timeline.dot"
neato -n2 -Tpng "$out/profile_timeline.dot" -o "$out/profile_timeline.png"
rm "$out/profile_timeline.dot"
echo "wrote $out/fusion.png, $out/profile_timeline.png, $out/profile_trace.json, $out/fusion.dot"
