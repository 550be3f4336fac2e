#!/usr/bin/env bash
# Installs every Debian package npucache needs to build, test and run.
# Idempotent: does nothing when all packages are already installed.
# Works as root or as a user with sudo; nothing is downloaded from outside
# Debian's package archive.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang-format lld
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev hdf5-tools
  libspdlog-dev libfmt-dev
  libzstd-dev
  libsodium-dev
  libxxhash-dev
  libhiredis-dev redis-server redis-tools
  prometheus prometheus-node-exporter curl
  libcli11-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev
  libbenchmark-dev
  python3
  python3-h5py python3-xxhash
  man-db
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
