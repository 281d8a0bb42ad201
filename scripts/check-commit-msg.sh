#!/usr/bin/env bash
# Checks a commit message file against CONTRIBUTING.md's "Commits" convention: a subject of at most 72 characters
# in the form `area: what`, where area is a top-level entry of the repository (a folder, or a file without its
# extension) optionally followed by /subfolders, and a blank line before any body. Lines starting with '#' are
# git's comments and are ignored. Merge and revert subjects that git writes pass as they are.
#
#   scripts/check-commit-msg.sh MESSAGE_FILE        exit 0: it follows the convention; 1: it does not (the reasons
#                                                   on stderr); 2: usage
#   ln -s ../../scripts/check-commit-msg.sh .git/hooks/commit-msg     # check every commit as it is made
#   git log --format=%B -n1 HEAD > m.txt && scripts/check-commit-msg.sh m.txt
set -euo pipefail
export LC_ALL=C.UTF-8  # ${#subject} counts characters, not bytes
readonly max_subject_chars=72

if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 MESSAGE_FILE" >&2
  exit 2
fi
message_file="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"

# The message as git keeps it: comment lines dropped, leading blank lines skipped.
mapfile -t lines < <(grep -v '^#' "$message_file" | sed -e 's/[[:space:]]*$//' | sed -e '/./,$!d')
problems=()
subject="${lines[0]:-}"
if [ -z "$subject" ]; then
  problems+=("the message is empty")
else
  if [ "${#subject}" -gt "$max_subject_chars" ]; then
    problems+=("the subject has ${#subject} characters, more than $max_subject_chars")
  fi
  git_written='^(Merge |Revert ")'
  if [[ ! "$subject" =~ $git_written ]]; then
    what="${subject#fixup! }"
    what="${what#squash! }"
    if [[ "$what" =~ ^([A-Za-z0-9_.-]+)(/[A-Za-z0-9_.-]+)*:\ [^[:space:]] ]]; then
      area="${BASH_REMATCH[1]}"
      found=0
      for entry in "$root"/* "$root"/.[!.]*; do
        name="$(basename "$entry")"
        if [ "$name" = "$area" ] || [ "${name%.*}" = "$area" ] || [ "$name" = ".$area" ]; then
          found=1
          break
        fi
      done
      if [ "$found" -eq 0 ]; then
        problems+=("the area '$area' is not a top-level folder or file of the repository")
      fi
    else
      problems+=("the subject is not of the form 'area: what' (e.g. 'sim/comm: latency grows with group size')")
    fi
  fi
  if [ "${#lines[@]}" -gt 1 ] && [ -n "${lines[1]}" ]; then
    problems+=("the second line is not blank: the body must be separated from the subject")
  fi
fi

if [ "${#problems[@]}" -gt 0 ]; then
  for problem in "${problems[@]}"; do
    echo "$message_file: $problem" >&2
  done
  echo "$message_file: subject: '$subject'" >&2
  exit 1
fi
