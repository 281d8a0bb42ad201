#!/usr/bin/env bash
# scripts/check-commit-msg.sh on good and bad commit messages: the good ones pass (exit 0), each bad one fails
# (exit 1) naming its problem, and a missing file is a usage error (exit 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $1"
  [ -f "$work/stderr.txt" ] && cat "$work/stderr.txt"
  exit 1
}
run() {  # run NAME MESSAGE: checks MESSAGE; its exit code in $code, its stderr in $work/stderr.txt
  printf '%s' "$2" > "$work/$1.txt"
  set +e
  "$root/scripts/check-commit-msg.sh" "$work/$1.txt" 2> "$work/stderr.txt"
  code=$?
  set -e
}
pass() {  # pass NAME MESSAGE
  run "$1" "$2"
  [ "$code" -eq 0 ] || fail "$1: a message that follows the convention was refused (exit $code)"
}
refuse() {  # refuse NAME MESSAGE EXPECTED_TEXT
  run "$1" "$2"
  [ "$code" -eq 1 ] || fail "$1: a message that breaks the convention passed (exit $code)"
  grep -qF -- "$3" "$work/stderr.txt" || fail "$1: the reason does not say '$3'"
}

body=$'\n\nWhy, and the numbers: 2.601 ms at 128 K (1.11x), from scripts/engine-traces.sh.\n'
subject72="docs/engine: $(printf 'x%.0s' $(seq 1 59))"  # 13 + 59 = 72 characters
pass subfolder_area "sim/comm: latency grows with group size$body"
pass top_level_area "kernels: the SM count is queried, not 132$body"
pass file_area "README: results through bench/results/INDEX.md$body"
pass hidden_folder_area "ci: a format check$body"
pass subject_only "scripts: a commit-message check"
pass exactly_72 "$subject72$body"
pass multibyte_within_72 "bench/results: MLA decode at 1 M is 1.64× the bound, 469.2 µs at batch 1$body"  # 72 characters, 74 bytes
pass git_comments $'# Please enter the commit message\n\nsim/cache: policies parse their own parameters\n\nWhy.\n# a comment\n'
pass merge "Merge branch 'i25-notes'$body"
pass fixup "fixup! sim/comm: latency grows with group size"

refuse too_long "${subject72}y$body" "73 characters, more than 72"
refuse no_area "Add the commit convention$body" "not of the form 'area: what'"
refuse no_space "sim/comm:latency grows$body" "not of the form 'area: what'"
refuse empty_what "sim/comm: $body" "not of the form 'area: what'"
refuse unknown_area "mla_decode_paged_bf16: the split count from the resolved algorithm$body" \
  "the area 'mla_decode_paged_bf16' is not a top-level folder"
refuse no_blank_line $'sim/comm: latency grows with group size\nWhy, on the next line.\n' "the second line is not blank"
refuse empty $'# only a comment\n\n' "the message is empty"

set +e
"$root/scripts/check-commit-msg.sh" "$work/does-not-exist.txt" 2> "$work/stderr.txt"
code=$?
set -e
[ "$code" -eq 2 ] || fail "a missing message file must be a usage error (exit $code)"
echo "check-commit-msg: all cases as expected"
