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
# The property tests draw their cases from one seed per commit (the first 15 hex digits of its
# id), so a commit's run is reproducible and every new commit tries new cases. A failure's
# seed is printed here: PROPTEST_RNG_SEED=<seed> scripts/test.sh reruns those exact cases.
if [ -z "${PROPTEST_RNG_SEED:-}" ] && commit=$(git rev-parse HEAD 2>/dev/null); then
  export PROPTEST_RNG_SEED=$((16#${commit:0:15}))
fi
echo "== cargo test (property-test seed: ${PROPTEST_RNG_SEED:-random, not a git checkout})"
cargo test --workspace --locked -- --show-output
