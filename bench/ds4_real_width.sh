#!/usr/bin/env bash
# deepseek4 at DeepSeek-V4-Flash's widths against llama.cpp on the same file and threads (issue 20):
# a 4-layer synth (ratios 0,4,128,4, one hash-routed layer, MXFP4 experts, Q8_0 dense: 15.5 GB),
#   1. resident: pp512, then pp64 / tg32 (bench/compare.sh: interleaved rounds, medians, ratios);
#   2. with strata's --expert-budget at 25% of the routed experts' bytes, both engines in a memory
#      cgroup limited to `strata plan`'s total for that run: decode tokens/s (tg8).
#
#   bench/ds4_real_width.sh LLAMA_BIN_DIR [MODEL.gguf]
# LLAMA_BIN_DIR holds llama-bench (llama.cpp v0.5.0 built for this CPU). MODEL defaults to
# build/big/v4flash-L4-mxfp4.gguf and is written first when absent (`strata synth --preset v4-flash`,
# ~15.5 GB on disk; minutes). Environment: THREADS (2), ROUNDS (3), STRATA (strata binary; default
# build/release/tools/strata), CTX (4096, the budget run's context), SKIP_RESIDENT (set: step 2 only).
# Needs root for the cgroup step
# (cgroup v1 memory controller or cgroup v2).
set -euo pipefail
if [[ $# -lt 1 ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
LLAMA=$1
MODEL=${2:-$here/build/big/v4flash-L4-mxfp4.gguf}
STRATA=${STRATA:-$here/build/release/tools/strata}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
CTX=${CTX:-4096}
[[ -x $LLAMA/llama-bench ]] || { echo "ds4_real_width.sh: no $LLAMA/llama-bench" >&2; exit 2; }
[[ -x $STRATA ]] || { echo "ds4_real_width.sh: no strata binary at $STRATA (set STRATA=...)" >&2; exit 2; }
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

if [[ ! -f $MODEL ]]; then
  mkdir -p "$(dirname "$MODEL")"
  "$STRATA" synth --preset v4-flash --layers 4 --compress-ratios 0,4,128,4 --hash-layers 1 -o "$MODEL"
fi

if [[ -z ${SKIP_RESIDENT:-} ]]; then
echo "## 1. resident"
STRATA=$STRATA THREADS=$THREADS ROUNDS=$ROUNDS REPS=2 N_PROMPT=512 N_GEN=0 "$here/bench/compare.sh" \
  "$LLAMA/llama-bench" "$MODEL" | grep -v '^(t/s'
STRATA=$STRATA THREADS=$THREADS ROUNDS=$ROUNDS REPS=3 N_PROMPT=64 N_GEN=32 "$here/bench/compare.sh" \
  "$LLAMA/llama-bench" "$MODEL"
fi

echo "## 2. experts over budget, both in a memory cgroup of the plan's total"
experts=$("$STRATA" plan -m "$MODEL" -c "$CTX" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["expert_weights_total"])')
budget=$((experts / 4))
limit=$("$STRATA" plan -m "$MODEL" -c "$CTX" --expert-budget "$budget" --json |
  "$PY" -c 'import json,sys; print(json.load(sys.stdin)["total"])')
echo "routed experts $experts B, --expert-budget $budget B, plan total (cgroup limit) $limit B"
if [[ -d /sys/fs/cgroup/memory ]]; then
  cg=/sys/fs/cgroup/memory/strata_ds4_$$
  mkdir "$cg"
  echo "$limit" > "$cg/memory.limit_in_bytes"
  peak() { cat "$cg/memory.max_usage_in_bytes"; }
else
  cg=/sys/fs/cgroup/strata_ds4_$$
  mkdir "$cg"
  echo "$limit" > "$cg/memory.max"
  peak() { cat "$cg/memory.peak" 2>/dev/null || echo "?"; }
fi
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
sync
echo 1 > /proc/sys/vm/drop_caches || true
in_cg "$STRATA" bench -m "$MODEL" -c "$CTX" -p 0 -n 8 -r 1 -t "$THREADS" --expert-budget "$budget" 2>&1 |
  tail -n 25 || true
echo "strata: cgroup peak $(peak) B of $limit"
sync
echo 1 > /proc/sys/vm/drop_caches || true
in_cg timeout 900 "$LLAMA/llama-bench" -m "$MODEL" -p 0 -n 2 -r 1 -t "$THREADS" 2>&1 | tail -n 6 || true
echo "llama.cpp: cgroup peak $(peak) B of $limit"
