#!/usr/bin/env bash
# Keeps the recipes true: every repository path that a guide names in backticks (`core/op_graph.cpp`,
# `sim/claims/`, `kernels/rmsnorm` for kernels/rmsnorm.{h,cu}) exists in the tree. Placeholders (`<name>`, `*`)
# and paths under build/ are skipped. Prints each missing path with the file and line that names it; exits 1 if any.
#   scripts/check-doc-paths.sh [file.md ...]     (default: CONTRIBUTING.md)
set -uo pipefail
root="${K3PERF_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
docs=("$@")
[ ${#docs[@]} -gt 0 ] || docs=("$root/CONTRIBUTING.md")
tops="$(cd "$root" && ls -d */ | tr -d / | paste -sd'|')"
status=0
for doc in "${docs[@]}"; do
  if [ ! -f "$doc" ]; then
    echo "$doc: no such file"
    status=1
    continue
  fi
  while IFS= read -r hit; do
    line="${hit%%:*}"
    token="${hit#*:}"
    token="${token//\`/}"
    path="${token%%:*}"  # `file.cpp:48` names a line of the file
    case "$path" in *'<'* | *'*'* | *'{'* | *'$'* | build/*) continue ;; esac
    [[ "$path" =~ ^($tops)/ ]] || continue
    stem="${path%/}"
    if [ -e "$root/$path" ] || compgen -G "$root/$stem.*" > /dev/null; then continue; fi
    echo "$doc:$line: \`$token\` names '$path', which is not in the tree"
    status=1
  done < <(grep -noE '`[^` ]+`' "$doc")
done
exit $status
