#!/usr/bin/env bash
# Installs every build and test dependency of k3perf from Debian packages.
# Idempotent: packages already present are skipped, so a second run is quick.
# Uses sudo when not run as root. The CUDA toolkit is optional and not installed here:
# when nvcc is on PATH (or in /usr/local/cuda/bin) the CUDA targets (bench/gpu/) are built too.
# pybind11-dev and python3-dev give the Python module (python/, docs/python.md), built by `make test`.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  clang clang-format
  libeigen3-dev
  zlib1g-dev
  libyaml-cpp-dev
  nlohmann-json3-dev
  libcli11-dev
  libfmt-dev
  libgtest-dev libgmock-dev
  libbenchmark-dev
  qt6-base-dev qt6-svg-dev
  pybind11-dev python3-dev
  fonts-dejavu-core xvfb
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1
  fi
fi

echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup-deps: done"
