#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine (root or sudo). Installs only what is missing:
#   1. the Rust toolchain named by rust-toolchain.toml (rustup);
#   2. ptxas / nvdisasm from PyPI into the project-local, git-ignored .tools/venv;
#   3. libcuda.so (Debian's libcuda1, contrib + non-free) only when no libcuda is present,
#      so the host crate links on machines without NVIDIA's driver.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Rust toolchain (rust-toolchain.toml pins version and components).
if ! command -v rustup >/dev/null 2>&1; then
  echo "setup: rustup is missing; install it from your distribution (apt-get install rustup) and rerun" >&2
  exit 1
fi
rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
log "rust $(rustc --version)"

# 2. ptxas + nvdisasm (offline PTX/SASS validation, no GPU needed).
venv=.tools/venv
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's own python3 ships venv separately.
    rm -rf "$venv"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
fi
if ! ls "$venv"/lib/python*/site-packages/nvidia/cuda_nvcc/bin/ptxas >/dev/null 2>&1 \
   || ! ls "$venv"/lib/python*/site-packages/nvidia/*/bin/nvdisasm >/dev/null 2>&1; then
  log "installing ptxas and nvdisasm into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'nvidia-cuda-nvcc-cu12==12.9.*' 'nvidia-cuda-nvdisasm==13.*'
fi

# 3. libcuda: the real driver's library wins; Debian's libcuda1 only where none exists.
have_libcuda() {
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so' && return 0
  ls /usr/lib/x86_64-linux-gnu/libcuda.so* /usr/local/nvidia/lib64/libcuda.so* >/dev/null 2>&1
}
if ! have_libcuda; then
  log "no libcuda found: installing Debian's libcuda1 (contrib, non-free) so the host crate links"
  src=/etc/apt/sources.list.d/ferrokern-nonfree.sources
  if [ ! -f "$src" ]; then
    as_root tee "$src" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends libcuda1 >/dev/null
fi
# libcuda1 ships libcuda.so.1 but not the unversioned name the linker asks for.
if [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so ] && [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ]; then
  as_root ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so
fi
log "ok"
