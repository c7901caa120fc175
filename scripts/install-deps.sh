#!/usr/bin/env bash
# Installs the Debian 12 packages ringfence needs to build, test and benchmark,
# skipping those already present. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang clang-format libclang-rt-14-dev lld
  libseccomp-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  bubblewrap busybox-static python3 curl openssl util-linux procps
  # The self-probe's test makes unshare fail and logs its mounts (issue 15)
  strace
  # The docker backend (issue 5): its TLS and tar, and what its tests start:
  # Debian's dockerd, test images from static busybox and bash, and an sshd
  # for the ssh:// transport.
  libssl-dev libarchive-dev docker.io bash-static openssh-server openssh-client socat
  # Hashes now, secrets with identity (libsodium); the Vault KV v2 fixture's
  # real client, which pins it to Vault's API (issue 11)
  libsodium-dev python3-hvac
  # Workflows (issue 12): mustache templates; the tests' git server (git
  # http-backend), S3 signatures checked against botocore
  libkainjow-mustache-dev git python3-botocore
  # The web console's test drives a real browser (issue 14)
  chromium
  # The fleet's shared store (issue 16): libpq, and the PostgreSQL the tests
  # start themselves (initdb into a temporary directory)
  libpq-dev postgresql-15
)
# node and npm fetch s3rver and the agent CLIs from the npm registry
# (scripts/install-agents.sh). Debian's only where there is none: a node from
# elsewhere (nodesource's nodejs carries its own npm) stays as it is.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
