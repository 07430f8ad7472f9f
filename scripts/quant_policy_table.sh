#!/bin/bash
# Issue 17's table: size, bpw, dPPL, KLD and routing consistency of quantization mixes of the
# bundled model, against its F16 export, with and without an importance matrix.
#   scripts/quant_policy_table.sh BUILD_DIR [THREADS]   -> BUILD_DIR/q17/results.txt (label|imatrix|bytes|size line|kld json)
# Calibration: the first half of tests/data/bundled_moe_valid.txt; scoring: the second half.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:?usage: quant_policy_table.sh BUILD_DIR [THREADS]}
T=${2:-2}
S=$B/tools/strata
D=$B/q17
mkdir -p "$D"
/usr/bin/python3 - "$ROOT/tests/data/bundled_moe_valid.txt" "$D" <<'PY'
import sys
s = open(sys.argv[1], encoding='utf-8').read()
i = s.index('\n', len(s) // 2)
open(sys.argv[2] + '/calib.txt', 'w', encoding='utf-8').write(s[:i + 1])
open(sys.argv[2] + '/eval.txt', 'w', encoding='utf-8').write(s[i + 1:])
PY
$S quantize --allow-requantize "$ROOT/models/strata-moe-31m-mxfp4.gguf" "$D/ref-f16.gguf" F16 > "$D/ref.log"
$S imatrix -m "$D/ref-f16.gguf" -f "$D/calib.txt" -o "$D/imatrix.gguf" -c 512 -t "$T" -q
run() {  # label ftype policy imatrix(0/1)
  local args=()
  [ -n "$3" ] && args+=(--policy "$3")
  [ "$4" = 1 ] && args+=(--imatrix "$D/imatrix.gguf")
  $S quantize -t "$T" "${args[@]}" "$D/ref-f16.gguf" "$D/q.gguf" "$2" > "$D/q.log"
  local j
  j=$($S kld -m "$D/q.gguf" --ref "$D/ref-f16.gguf" -f "$D/eval.txt" -c 512 -t "$T" --json -q)
  echo "$1|$4|$(stat -c %s "$D/q.gguf")|$(grep 'model size' "$D/q.log")|$j" | tee -a "$D/results.txt"
}
: > "$D/results.txt"
for im in 0 1; do
  run "all-MXFP4 (fp4-all)" MXFP4_MOE fp4-all $im
  run "MXFP4 experts + Q8_0 rest (MXFP4_MOE)" MXFP4_MOE "" $im
  run "+ layers 0,5 experts Q8_0" MXFP4_MOE "layers[0,-1].experts=q8_0" $im
  for t in Q4_K_M Q4_K_S Q5_K_M Q4_0; do run "$t" $t "" $im; done
done
