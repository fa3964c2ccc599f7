#!/usr/bin/env bash
# Usage: verify-sweep.sh FERROKERN [TIMEOUT_S]. Localizes a hang or a failure in the attention
# families on a GPU: one `ferrokern verify` per case (every version, head dims 64, 128 and 256,
# causal or not, bf16, 1x1, 100x149 and 128x128 keys, forward and backward), six at a time,
# each under its own timeout (8 s by default; exit 124 = it hung). Prints every case that did
# not pass (a refusal, exit 2, is a version without that head dim, or no GPU) and the counts. gpu-bundle's
# run.sh runs it when an attention test binary timed out.
set -u
bin="$1"
limit="${2:-8}"
[ -x "$bin" ] || { echo "verify-sweep: $bin is not an executable" >&2; exit 2; }
cases=()
for op in attention attention_backward; do
  for v in v01_simt v02_mma v03_wgmma v04_pingpong; do
    [ "$op" = attention_backward ] && [ "$v" = v04_pingpong ] && continue
    for hd in 64 128 256; do
      for c in nc causal; do
        for s in 1:1 100:149 128:128; do cases+=("$op $v $hd $c ${s%:*} ${s#*:}"); done
      done
    done
  done
done
one() {
  # shellcheck disable=SC2086
  set -- $1
  local flag=""
  [ "$4" = causal ] && flag=--causal
  local log rc
  log=$(timeout -k 2 "$SWEEP_LIMIT" "$SWEEP_BIN" verify "$1" --backend gpu --kernel "$2" --batch 1 --heads 2 \
    --kv-heads 1 --seq-q "$5" --seq-k "$6" --head-dim "$3" $flag --dtype bf16 --seed 7 2>&1)
  rc=$?
  echo "$* rc=$rc $(echo "$log" | tail -n 1 | cut -c1-160)"
}
export -f one
export SWEEP_BIN="$bin" SWEEP_LIMIT="$limit"
all=$(printf '%s\n' "${cases[@]}" | xargs -P 6 -I{} bash -c 'one "{}"' | sort)
echo "$all" | grep -v " rc=0 PASS" | grep -v " rc=2 "
echo "verify-sweep: ${#cases[@]} cases: $(echo "$all" | grep -c ' rc=0 PASS') passed, $(echo "$all" | grep -c ' rc=124 ') hung, $(echo "$all" | grep -c ' rc=2 ') refused (exit 2: the version lacks that head dim, or no GPU), $(echo "$all" | grep -vc ' rc=0 PASS\| rc=124 \| rc=2 ') failed"
