#!/usr/bin/env bash
# Installs what is missing, builds dvm (Release) and runs the demo: the GPT
# decoder of examples/gpt.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target dvm_gpt
./build/examples/dvm_gpt
