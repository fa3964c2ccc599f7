#!/usr/bin/env bash
# Builds, on this machine, everything a GPU machine without Rust needs into gpu-bundle/
# (git-ignored): the release test binaries, the criterion bench binaries, the `ferrokern` CLI,
# and run.sh, which runs them all there. Usage: scripts/gpu-bundle.sh, then on the GPU machine
# `gpu-bundle/run.sh LOGDIR` (or OUT=LOGDIR gpu-bundle/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
bundle=gpu-bundle
rm -rf "$bundle"
# Binaries are staged, then packed into one xz tarball: each embeds the PTX for every arch
# (about 55 MB), so the binaries repeat one another; one single-threaded xz stream with a
# dictionary larger than any one binary finds those repeats and keeps the bundle under the
# 64 MiB a GPU run carries (unpacked it is about 1.4 GB). xz's default dictionary (8 MiB)
# does not reach from one binary to the next: that packing came out over 90 MB.
stage="$bundle/stage"
mkdir -p "$stage/tests" "$stage/benches"

list_exes() { # $@: cargo subcommand and flags; prints "name path" per test/bench executable
  cargo "$@" --locked --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])'
}

cargo build --release --locked --bin ferrokern
cp target/release/ferrokern "$stage/"
# Cubins of every arch, assembled here by ptxas from the embedded PTX: without them the
# driver there compiles the whole sm_90a module in every test process (minutes each).
target/release/ferrokern cubins "$stage/cubins"
# The attention baseline (PyTorch) runs from a helper script beside the CLI.
cp scripts/torch_attention.py "$stage/"
# Run there when an attention test hangs: which version, head dim and shape.
cp scripts/verify-sweep.sh "$stage/"
# tests/cli.rs runs the CLI by its build-machine path; run.sh exercises the CLI directly.
list_exes test --release --workspace | while read -r name exe; do
  [ "$name" = cli ] || cp "$exe" "$stage/tests/$name"
done
list_exes bench --bench '*' | while read -r name exe; do cp "$exe" "$stage/benches/$name"; done
strip "$stage/ferrokern" "$stage"/tests/* "$stage"/benches/* 2>/dev/null || true

cat > "$bundle/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on a GPU machine with a driver and no Rust, within RUN_BUDGET_S seconds (default 480):
# `ferrokern info` in the background (its ptxas table comes from that machine's CUDA), the GPU
# tests of the tensor-core and paged families (FERROKERN_REQUIRE_GPU=1, the GPU half only),
# `ferrokern bench --json` (leaving out a family whose tests hung), the other tests, the
# sanitizer over the tests, the criterion benches; each step under its own timeout, so a hung
# kernel costs one step, not the session. Logs go to $1 (or $OUT, or ./gpu-logs); a summary
# table is printed last.
set -uo pipefail
packed="$(cd "$(dirname "$0")" && pwd)/bundle.tar.xz"
here="$(mktemp -d "${TMPDIR:-/tmp}/ferrokern-bundle.XXXXXX")"
trap 'rm -rf "$here"' EXIT
if ! tar -xJf "$packed" -C "$here" 2>/dev/null; then
  # No xz-enabled tar: Python's tarfile reads xz through lzma.
  python3 -m tarfile -e "$packed" "$here" || { echo "cannot unpack $packed" >&2; exit 1; }
fi
out="${1:-${OUT:-./gpu-logs}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# The driver's libcuda may live outside the loader's default paths (e.g. a read-only mount).
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/libcuda.so.1" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
  done
fi
# cuBLAS for GEMM baselines: a CUDA install or pip's nvidia-cublas packages.
if [ -z "${FERROKERN_CUBLAS:-}" ]; then
  FERROKERN_CUBLAS="$(ls /usr/local/cuda/lib64/libcublas.so* /opt/torch/.venv/lib/python*/site-packages/nvidia/cublas/lib/libcublas.so* \
    /usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so* 2>/dev/null | head -n 1 || true)"
  export FERROKERN_CUBLAS
fi
export FERROKERN_REQUIRE_GPU=1
# The cubins made on the build machine; should the driver refuse one and compile the PTX
# instead, its JIT cache (kept for this run) saves the later processes from doing it again.
export FERROKERN_CUBIN_DIR="$here/cubins"
export CUDA_CACHE_PATH="$here/jit-cache" CUDA_CACHE_MAXSIZE=4294967296
# The emulator half of each test already runs in CI; here only the GPU half does.
export FERROKERN_SKIP_EMULATOR=1
# The property tests' seed: drawn here unless given, and printed with the summary, so a
# failure on the GPU reruns with the same cases (PROPTEST_RNG_SEED=<seed> <test binary>).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
summary=()
declare -A result
status=0
cd "$out"
# A time budget for the whole run (a lent GPU has minutes): every step gets at most its own
# limit and what is left; a step that would start with under 20 s left is skipped and says so.
budget="${RUN_BUDGET_S:-480}"
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
# step NAME LIMIT_S LOG CMD...: runs CMD under `timeout`, records pass / FAIL / TIMEOUT / skipped.
step() {
  local name="$1" limit="$2" log="$3"; shift 3
  local l; l=$(left)
  if [ "$l" -lt 20 ]; then summary+=("$name: skipped (time budget of ${budget}s spent)"); return 0; fi
  [ "$limit" -gt $((l - 10)) ] && limit=$((l - 10))
  timeout --kill-after=5 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local res=pass
  if [ $rc = 124 ] || [ $rc = 137 ]; then res="TIMEOUT after ${limit}s"; status=1
  elif [ $rc != 0 ]; then res="FAIL (exit $rc)"; status=1; fi
  result[$name]="$res"
  summary+=("$name: $res $(grep -E '^test result|ERROR SUMMARY' "$log" | tail -n 1)")
}
# Device line and the per-kernel table of this machine's ptxas (CPU only, minutes: it
# assembles every arch), beside the GPU steps.
timeout --kill-after=5 $((budget - 30)) "$here/ferrokern" info >"$out/info.txt" 2>&1 &
info_pid=$!
# run_tests NAME...: each named test binary not run yet, one step each.
run_tests() {
  for name in "$@"; do
    [ -x "$here/tests/$name" ] || continue
    case " $done_tests " in *" $name "*) continue ;; esac
    done_tests="$done_tests $name"
    step "test $name" 90 "$out/test-$name.log" "$here/tests/$name" --test-threads=1
  done
}
# CPU-only binaries CI runs: the offline ptxas/SASS checks (info.txt has this machine's ptxas
# table), the emulator's own tests, and the crates' unit tests.
done_tests=" ptxas emulator gpu_kernels ferrokern ferrokern_host"
# First the tests that confirm hardware layouts and the mbarrier/TMA protocols: a family
# whose test hung would hang the bench too, so the bench leaves it out.
run_tests mma gemm_tc attention attention_backward paged_decode
skip=()
for fam in gemm_tc attention attention_backward paged_decode; do
  case "${result["test $fam"]:-}" in TIMEOUT*) skip+=(--skip "$fam") ;; esac
done
# A hang names no case; one `verify` per version, head dim and shape does (about a minute).
case "${result["test attention"]:-} ${result["test attention_backward"]:-}" in
  *TIMEOUT*)
    step "verify sweep (attention)" 120 "$out/verify-sweep.txt" "$here/verify-sweep.sh" "$here/ferrokern"
    summary+=("$(tail -n 1 "$out/verify-sweep.txt")")
    ;;
esac
step "bench${skip[*]:+ ${skip[*]}}" 300 "$out/bench.txt" "$here/ferrokern" bench --json bench.json "${skip[@]}"
run_tests elementwise reduce softmax cross_entropy norm gemm device_fault concurrency bad_input $(ls "$here/tests")
# compute-sanitizer over the GPU tests, with fewer property cases (it is orders of magnitude
# slower). memcheck and initcheck: every kernel family; racecheck and synccheck: the families
# whose kernels use shared memory and barriers. The device-fault test faults on purpose and
# is left out.
if command -v compute-sanitizer >/dev/null 2>&1 && [ "${SANITIZE:-1}" = 1 ]; then
  export FERROKERN_CASES="${SANITIZE_CASES:-6}"
  for tool in memcheck racecheck synccheck initcheck; do
    case "$tool" in
      memcheck|initcheck) bins="gemm_tc attention attention_backward paged_decode elementwise reduce softmax cross_entropy norm gemm mma concurrency" ;;
      *) bins="gemm_tc attention attention_backward paged_decode reduce softmax norm gemm" ;;
    esac
    for b in $bins; do
      [ -x "$here/tests/$b" ] || continue
      log="$out/sanitizer-$tool-$b.log"
      step "compute-sanitizer $tool $b" 60 "$log" \
        compute-sanitizer --tool "$tool" --error-exitcode 86 "$here/tests/$b" --test-threads=1
      # Some runtimes (gVisor) refuse the device to the sanitizer at once: say so once and
      # leave the budget to the rest, instead of one failure per binary and tool.
      if grep -q "Device not supported" "$log" 2>/dev/null; then
        unset 'summary[${#summary[@]}-1]'
        summary+=("compute-sanitizer: refused the device on this machine ($(grep -m1 'Device not supported' "$log")); no sanitizer run")
        break 2
      fi
    done
  done
  unset FERROKERN_CASES
else
  summary+=("compute-sanitizer: not found or SANITIZE=0")
fi
for b in "$here"/benches/*; do
  [ -x "$b" ] || continue
  step "criterion $(basename "$b")" 60 "$out/criterion-$(basename "$b").log" \
    "$b" --bench --warm-up-time 1 --measurement-time 2
done
if kill -0 "$info_pid" 2>/dev/null; then
  kill "$info_pid" 2>/dev/null
  summary+=("info: cut short at the end of the budget (info.txt has what it printed)")
elif wait "$info_pid"; then
  summary+=("info: pass")
else
  summary+=("info: FAIL or TIMEOUT (see info.txt)")
fi
spills=$(awk '$1 ~ /^sm_/ && NF == 6 && ($5 > 0 || $6 > 0) { printf "%s %s (spill %s B, stack %s B); ", $1, $2, $5, $6 }' "$out/info.txt")
summary+=("info: $(grep -c '^sm_' "$out/info.txt") kernel rows from this machine's ptxas; spills or stack: ${spills:-none}")
# The device tool brings back only a few files: the step logs travel in one tarball.
logs=$(ls test-*.log sanitizer-*.log criterion-*.log 2>/dev/null)
if [ -n "$logs" ] && tar -czf logs.tar.gz $logs; then rm -f $logs; fi
# The bench table first and the summary last, so a tail of the output shows the summary.
echo "== bench"
cat "$out/bench.txt" 2>/dev/null
echo "== summary ($(date -u +%F), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1), PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED)"
head -n 1 "$out/info.txt"
printf '%s\n' "${summary[@]}"
echo "== used $(( $(date +%s) - t0 ))s of the ${budget}s budget; step logs in logs.tar.gz"
exit $status
RUN
chmod +x "$bundle/run.sh"
tar -cf - -C "$stage" . | xz -T1 --lzma2=preset=6,dict=256MiB >"$bundle/bundle.tar.xz"
rm -rf "$stage"
size=$(stat -c %s "$bundle/bundle.tar.xz")
if [ "$size" -gt $((60 << 20)) ]; then
  echo "gpu-bundle: bundle.tar.xz is $size bytes, too close to the 64 MiB a GPU run carries" >&2
  exit 1
fi
du -sh "$bundle"
