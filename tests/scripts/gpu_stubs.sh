# Sourced by the tests of the scripts that run on an H200 machine: `root` (the repository), `work` (a temporary folder
# with bundle/bin, bundle/lib and path/, removed on exit), `stub DIR NAME BODY` (an executable bash script) and
# `fail MESSAGE FILE` (prints both and exits 1).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bundle/bin" "$work/bundle/lib" "$work/path"
stub() {
  printf '#!/usr/bin/env bash\n%s\n' "$3" > "$1/$2"
  chmod +x "$1/$2"
}
fail() {
  echo "FAIL: $1"
  cat "$2"
  exit 1
}
