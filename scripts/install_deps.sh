#!/usr/bin/env bash
# Installs the Debian packages dvm builds with, when any is missing. Idempotent.
#   scripts/install_deps.sh --bench   also bench_dvm's optional comparison
#                                     systems sleef_loop (libsleef-dev) and
#                                     eigen (libeigen3-dev); libtorch-dev is
#                                     left to the README (it is large)
set -euo pipefail
pkgs=(g++ cmake make libasmjit-dev libxbyak-dev libtbb-dev libgtest-dev libbenchmark-dev)
if [ "${1:-}" = --bench ]; then
  pkgs+=(libsleef-dev libeigen3-dev)
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--bench]" >&2
  exit 2
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "dvm: missing packages: ${missing[*]}" >&2
  echo "dvm: run as root: $cmd" >&2
  exit 1
fi
echo "dvm: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
