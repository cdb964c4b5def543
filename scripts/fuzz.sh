#!/usr/bin/env bash
# The bytecode fuzzer (fuzz/): builds it with clang in build-fuzz/ and runs it.
#
#   scripts/fuzz.sh [SECONDS]   fuzz for SECONDS (default 3600)
#   scripts/fuzz.sh --small [SECONDS]
#                               the same with small launches only (C <= 1000, no
#                               split launches: DVM_FUZZ_SMALL), several times the
#                               executions per second
#   scripts/fuzz.sh --ci        bounded run for CI (90 s of fuzzing, plus the build)
#   scripts/fuzz.sh --corpus    regenerate the seed corpus fuzz/corpus/ from the fuser's kernels
#
# Exits non-zero on a crash, a sanitizer report or a failed check; the input
# that caused it is left in build-fuzz/artifacts/. New inputs the fuzzer
# finds accumulate in build-fuzz/corpus/ (the seeds in fuzz/corpus/ are read,
# never written). DVM_FUZZ_BUILD overrides the build folder.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${DVM_FUZZ_BUILD:-$root/build-fuzz}
mode=fuzz
seconds=3600
if [ "${1:-}" = --small ]; then
  export DVM_FUZZ_SMALL=1
  shift
fi
case "${1:-}" in
  --ci) seconds=90 ;;
  --corpus) mode=corpus ;;
  "") ;;
  *[!0-9]*) echo "usage: $0 [--small] [SECONDS] | --ci | --corpus" >&2; exit 2 ;;
  *) seconds=$1 ;;
esac

# clang and libFuzzer's runtime (Debian: clang, libclang-rt-14-dev).
need=()
command -v clang++ >/dev/null || need+=(clang)
if ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  need+=(libclang-rt-dev)
fi
if ((${#need[@]})); then
  echo "fuzz.sh: installing ${need[*]}"
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}"
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DDVM_FUZZ=ON \
  -DDVM_BUILD_TESTS=OFF -DDVM_BUILD_EXAMPLES=OFF -DDVM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_bytecode make_corpus

if [ "$mode" = corpus ]; then
  exec "$build/fuzz/make_corpus" "$root/fuzz/corpus"
fi

mkdir -p "$build/corpus" "$build/artifacts"
log=$build/fuzz.log
start=$(date +%s)
set +e
# One worker (-max_len: kernels of typical size; the harness bounds the launch).
# -timeout: a split launch (kSplitRowMin floats and more) on every ISA under
# ASan takes seconds on a loaded machine; a hang still stops the run.
"$build/fuzz/fuzz_bytecode" -max_len=512 -max_total_time="$seconds" -timeout=120 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$build/corpus" "$root/fuzz/corpus" 2>&1 |
  tee "$log" | grep --line-buffered -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE)'
status=${PIPESTATUS[0]}
set -e
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
if [ -z "$execs" ]; then  # no final stats after a crash: the last status line's count
  execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
fi
echo "fuzz.sh: ${execs:-0} executions in $(($(date +%s) - start)) s, exit status $status (log: $log)"
exit "$status"
