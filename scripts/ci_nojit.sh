#!/usr/bin/env bash
# The interpreter-only build: configures dvm with -DDVM_JIT=OFF in
# build-nojit/, runs the whole test suite there (tests that need machine code
# skip, naming the reason), checks with nm that libdvm.a cannot make
# executable memory, and builds and runs examples/consumer against that
# build installed (scripts/ci_consumer.sh --prebuilt).
#   scripts/ci_nojit.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-nojit
scripts/install_deps.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDVM_JIT=OFF -DDVM_BUILD_BENCH=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"

# The nm check. A process gets executable memory only from the kernel:
# mmap/mmap64 with PROT_EXEC, mprotect/pkey_mprotect turning pages
# executable, mremap of such pages, or memfd_create for a dual mapping (what
# asmjit's allocator does under a W^X policy). dvm's own code has no use for
# any of these (the interpreters use malloc'ed buffers), so:
#  1. no object in libdvm.a refers to those functions (an undefined symbol
#     is how a static library's object calls libc);
#  2. no symbol, defined or undefined, names asmjit or Xbyak: the JIT's
#     emitters are the only code that would bring them, and a header-only
#     one (Xbyak) would otherwise hide inside dvm's own objects.
# In a JIT build check 2 fails (dvm's objects call asmjit::JitRuntime) while
# check 1 holds, as asmjit itself is a separate library.
lib=$build/libdvm.a
[ -f "$lib" ] || { echo "ci_nojit: $lib is missing" >&2; exit 1; }
fail=0
calls=$(nm -A -u "$lib" | grep -E ' U (mmap|mmap64|mprotect|pkey_mprotect|mremap|memfd_create)$' || true)
if [ -n "$calls" ]; then
  printf '%s\n' "$calls" >&2
  echo "ci_nojit: $lib refers to a function that can make memory executable (above)" >&2
  fail=1
fi
jit=$(nm -A -C "$lib" | grep -i -E 'asmjit|xbyak' || true)
if [ -n "$jit" ]; then
  printf '%s\n' "$jit" | head -20 >&2
  echo "ci_nojit: $lib has $(printf '%s\n' "$jit" | wc -l) asmjit/Xbyak symbols (first 20 above)" >&2
  fail=1
fi
[ $fail = 0 ] || exit 1
echo "ci_nojit: nm: $lib has no asmjit/Xbyak symbol and no mmap/mprotect/mremap/memfd_create reference" >&2

scripts/ci_consumer.sh --prebuilt "$build"
echo "ci_nojit: DVM_JIT=OFF build, suite, nm check and consumer passed in $(( $(date +%s) - start )) s" >&2
