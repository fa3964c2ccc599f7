#!/usr/bin/env bash
# The main job: setup (idempotent), then `ferrokern bench`. On a GPU it measures every kernel
# against its baseline; without one it says so, runs the emulator's correctness sweep and
# prints the PTX resource table. Extra arguments go to `ferrokern bench` (e.g. --json out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo run --release --locked --bin ferrokern -- bench "$@"
