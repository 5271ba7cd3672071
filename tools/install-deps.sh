#!/usr/bin/env bash
# Install what gopt needs to build and test, on Debian 12 (apt-get; sudo when
# not root). Installs only what is missing; does nothing when all is present.
set -euo pipefail
PKGS=(build-essential cmake pkg-config libigraph-dev libgsl-dev libopenblas-dev zlib1g-dev
      libcmocka-dev libjansson-dev libmetis-dev libprotobuf-c-dev protobuf-c-compiler
      libopenmpi-dev openmpi-bin
      clang libclang-rt-14-dev)  # clang + libFuzzer and the sanitizer runtimes: tools/fuzz.sh only
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
