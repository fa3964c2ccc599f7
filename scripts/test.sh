#!/usr/bin/env bash
# The test command: setup (idempotent), then formatting, lints with warnings denied, and the
# whole test suite. Without a GPU every kernel's tests run on the emulator and GPU-only tests
# print `SKIP:`; FERROKERN_REQUIRE_GPU=1 turns those skips into failures.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== README results table is generated from results/*.json"
python3 scripts/results_table.py --check || { echo "README results are stale: run scripts/results_table.py" >&2; exit 1; }
echo "== cargo test"
cargo test --workspace --locked -- --show-output
