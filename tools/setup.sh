#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages that ddplab's build and tests need.
# Idempotent and non-interactive: packages already present are left alone.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap        # Bazel 4.2.3
  g++
  libtorch-dev           # LibTorch (CPU) headers and libraries
  libopenblas0-serial    # the BLAS LibTorch recommends, in place of the reference BLAS (a CPU
                         # step's matrix products; one thread, as each rank is a process)
  libgloo-dev            # Gloo, c10d's CPU backend
  libabsl-dev            # Abseil
  libprotobuf-dev        # Protocol Buffers runtime
  protobuf-compiler      # protoc
  libgtest-dev           # GoogleTest
  python3
  python3-torch          # PyTorch's own DDP and hooks: the reference of the Python tests
  clang                  # the compiler (.bazelrc), and libFuzzer for the fuzz config
  libclang-rt-dev        # libFuzzer and the sanitizer runtimes for clang
  chromium               # headless, to open report.html in a browser (//core:report_html_browser_test)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
