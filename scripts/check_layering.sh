#!/usr/bin/env bash
# Checks the include layering of the source folders (DESIGN.md, "Architecture
# v2"): every #include "folder/..." line in a folder that the rules below
# forbid is a violation, printed as file:line: included header; so is an
# include of asmjit or of backends/jit/x86/ outside backends/jit/x86/, and one
# of xbyak outside backends/cube/xbyak/. Violations
# listed in scripts/layering_exceptions.txt (one "file:header" per line) are
# allowed while they last; a listed one that no longer occurs is an error too,
# so the list only shrinks. Exits non-zero on any error.
#
# Usage: scripts/check_layering.sh [source root] (default: this script's repo)
set -u
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root" || exit 2
exceptions_file=scripts/layering_exceptions.txt

# folder: the prefixes its files may not include.
rules=(
  "graph: backends/ runtime/"
  "tracer: graph/ fuser/ vm/ backends/ runtime/"
  "vm: graph/ tracer/ fuser/ runtime/ backends/jit/"
  "backends: graph/ tracer/ fuser/ runtime/"
  "fuser: graph/ runtime/ backends/"
)

declare -A allowed=() seen=()
if [[ -f $exceptions_file ]]; then
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [[ -n $line ]] && allowed[$line]=1
  done <"$exceptions_file"
fi

errors=0
for rule in "${rules[@]}"; do
  folder=${rule%%:*}
  [[ -d $folder ]] || continue
  for prefix in ${rule#*:}; do
    # file:line:#include "header"
    while IFS= read -r hit; do
      [[ -n $hit ]] || continue
      file=${hit%%:*}
      rest=${hit#*:}
      lineno=${rest%%:*}
      header=$(sed -E 's/^[^"]*"([^"]+)".*/\1/' <<<"${rest#*:}")
      key="$file:$header"
      if [[ -n ${allowed[$key]:-} ]]; then
        seen[$key]=1
      else
        echo "layering: $file:$lineno includes $header ($folder/ may not include $prefix)"
        errors=$((errors + 1))
      fi
    done < <(grep -rnE --include='*.h' --include='*.cpp' "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$prefix" "$folder" | sort)
  done
done

# Third-party emitters stay behind their adapter folder: asmjit and the x86
# target's headers are included only under backends/jit/x86/ (an a64/ target
# would sit beside it without touching the rest of the JIT).
while IFS= read -r hit; do
  [[ -n $hit ]] || continue
  header=${hit#*#include}
  echo "layering: ${hit%%:#*} includes ${header# } (only backends/jit/x86/ may)"
  errors=$((errors + 1))
done < <(grep -rnE --include='*.h' --include='*.cpp' \
           '^[[:space:]]*#[[:space:]]*include[[:space:]]*(<asmjit/|"backends/jit/x86/)' \
           tracer graph fuser vm backends runtime include 2>/dev/null | grep -v '^backends/jit/x86/' | sort)

# The cube unit's emitter, xbyak, likewise stays in backends/cube/xbyak/.
while IFS= read -r hit; do
  [[ -n $hit ]] || continue
  header=${hit#*#include}
  echo "layering: ${hit%%:#*} includes ${header# } (only backends/cube/xbyak/ may)"
  errors=$((errors + 1))
done < <(grep -rnE --include='*.h' --include='*.cpp' \
           '^[[:space:]]*#[[:space:]]*include[[:space:]]*<xbyak/' \
           tracer graph fuser vm backends runtime include 2>/dev/null | grep -v '^backends/cube/xbyak/' | sort)

for key in "${!allowed[@]}"; do
  if [[ -z ${seen[$key]:-} ]]; then
    echo "layering: $exceptions_file lists $key, which no longer occurs: remove it from the list"
    errors=$((errors + 1))
  fi
done

if ((errors > 0)); then
  echo "layering: $errors error(s)"
  exit 1
fi
echo "layering: ok (${#allowed[@]} listed exception(s) remain)"
