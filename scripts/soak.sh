#!/usr/bin/env bash
# Random-seed soak of the property tests (every test named *match*; emulator, and the GPU when
# there is one): ROUNDS rounds of CASES cases per property, each round under a fresh seed that
# it prints first, so a failure reruns with the printed PROPTEST_RNG_SEED and FERROKERN_CASES.
# CI tries one seed per commit (scripts/test.sh); this looks further. Usage:
#   scripts/soak.sh [ROUNDS=4] [CASES=200]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-4}
cases=${2:-200}
for r in $(seq 1 "$rounds"); do
  seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  echo "== soak round $r/$rounds: PROPTEST_RNG_SEED=$seed FERROKERN_CASES=$cases"
  PROPTEST_RNG_SEED=$seed FERROKERN_CASES=$cases cargo test --workspace --locked --tests -- match
done
echo "== soak: $rounds rounds of $cases cases passed"
