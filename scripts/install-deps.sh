#!/usr/bin/env bash
# Installs every Debian package that building, testing and the demo need.
# Idempotent and non-interactive: it only calls apt-get when a package is missing.
set -euo pipefail

packages=(
  # build
  cmake ninja-build ccache gcc g++ pkg-config
  # LLVM/MLIR 22 (shared libLLVM.so / libMLIR.so; lit and FileCheck in bin/)
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22
  # libraries
  libyaml-cpp-dev flatbuffers-compiler libflatbuffers-dev libgtest-dev
  libopenblas-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev zlib1g-dev
  # reference tests
  python3 python3-numpy python3-torch python3-yaml
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
