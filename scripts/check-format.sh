#!/usr/bin/env bash
# The tree's format gate (CONTRIBUTING.md, "Format"): C++ and CUDA files as clang-format writes them
# (.clang-format), and every tracked text file as .editorconfig says (LF line ends, a final newline, no
# trailing whitespace, no tabs outside Makefiles). Prints each file that fails and exits 1; exits 0 when
# all pass. With --fix, rewrites the C++ files with clang-format instead of checking them.
#   scripts/check-format.sh [--fix] [file ...]     (no files: every file git tracks)
set -uo pipefail
cd "$(dirname "$0")/.."
fix=0
if [ "${1:-}" = --fix ]; then
  fix=1
  shift
fi
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check-format: clang-format not found (scripts/setup-deps.sh installs it)" >&2
  exit 2
fi
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files); fi
failed=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  case "$f" in
    *.json.gz|*.gz|*.png|*.svg|*.safetensors|*.bin) continue ;;  # binary or generated data
    data/*|tests/data/*|profiler/fixtures/*|bench/results/*) continue ;;  # recorded data, kept as written
  esac
  case "$f" in
    *.cpp|*.h|*.cu|*.cuh)
      if [ "$fix" = 1 ]; then
        clang-format -i "$f"
      elif ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "$f: not as clang-format writes it (scripts/check-format.sh --fix $f)"
        failed=1
      fi ;;
  esac
  if grep -q $'\r' "$f"; then echo "$f: CR line ends"; failed=1; fi
  if [ -s "$f" ] && [ -n "$(tail -c 1 "$f")" ]; then echo "$f: no final newline"; failed=1; fi
  if grep -nE '[[:space:]]+$' "$f" | head -n 1 | grep -q .; then
    echo "$f:$(grep -nE '[[:space:]]+$' "$f" | head -n 1 | cut -d: -f1): trailing whitespace"
    failed=1
  fi
  case "$(basename "$f")" in
    Makefile|*.mk) ;;
    *) if grep -nP '\t' "$f" | head -n 1 | grep -q .; then
         echo "$f:$(grep -nP '\t' "$f" | head -n 1 | cut -d: -f1): tab (.editorconfig: spaces)"
         failed=1
       fi ;;
  esac
done
exit $failed
