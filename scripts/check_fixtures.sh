#!/usr/bin/env bash
# Runs `strata logits` on every llama.cpp fixture (all architectures) in both modes
# (batch, incremental) and checks the result with the fixtures' own check_fixture.py.
#   scripts/check_fixtures.sh BUILD_DIR [FILTER]     (FILTER: substring of the fixture name)
# Env: STRATA_FIXTURES (default ../shared/fixtures beside the repo), PYTHON (default
# /usr/bin/python3, which has numpy), THREADS (default 2), STRATA_ARGS (more `strata logits` flags,
# e.g. "--device Vulkan0").
# Quantized fixtures are checked with --criteria faithful, then f32_activations if that fails.
set -u
BUILD=${1:?usage: check_fixtures.sh BUILD_DIR [FILTER]}
FILTER=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIX=${STRATA_FIXTURES:-$ROOT/../shared/fixtures}
PY=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
read -r -a EXTRA <<<"${STRATA_ARGS:-}"
STRATA=$BUILD/tools/strata
[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build the 'strata' target)"; exit 2; }
[ -d "$FIX/logits" ] || { echo "no fixtures at $FIX (set STRATA_FIXTURES)"; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fails=0
printf '%-36s %-11s %-15s %-10s %-10s %-10s %-8s %s\n' fixture mode criteria "max|d|" "KL max" "KL mean" argmax verdict
for js in "$FIX"/logits/*.json; do
  name=$(basename "$js" .json)
  [ -n "$FILTER" ] && [[ $name != *"$FILTER"* ]] && continue
  read -r model tokens cls < <("$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["model_file"], ",".join(map(str,m["tokens"])), m["pass_class"])' "$js")
  for mode in batch incremental; do
    out=$TMP/$name.$mode.f32
    if ! "$STRATA" logits -m "$FIX/$model" --tokens "$tokens" -o "$out" --mode "$mode" -t "$THREADS" "${EXTRA[@]}" 2>"$TMP/err"; then
      printf '%-36s %-11s %-15s %s\n' "$name" "$mode" "-" "ERROR: $(tail -1 "$TMP/err")"
      fails=$((fails + 1))
      continue
    fi
    crits=(faithful)
    [ "$cls" != f32 ] && crits=(faithful f32_activations)
    for crit in "${crits[@]}"; do
      res=$("$PY" "$FIX/tools/check_fixture.py" "$js" "$out" --criteria "$crit")
      rc=$?
      maxd=$(grep -o 'max_abs *= *[0-9.e+-]*' <<<"$res" | awk '{print $3}')
      klx=$(grep -o 'kl_max *= *[0-9.e+-]*' <<<"$res" | awk '{print $3}')
      klm=$(grep -o 'kl_mean *= *[0-9.e+-]*' <<<"$res" | awk '{print $3}')
      am=$(grep -o 'argmax_agree = [0-9.]*' <<<"$res" | awk '{print $3}')
      label=$crit
      [ "$cls" = f32 ] && label=f32
      verdict=PASS
      [ $rc -ne 0 ] && verdict=FAIL
      printf '%-36s %-11s %-15s %-10s %-10s %-10s %-8s %s\n' "$name" "$mode" "$label" "${maxd:--}" "${klx:--}" "${klm:--}" "${am:--}" "$verdict"
      [ $rc -eq 0 ] && break
      [ "$crit" = f32_activations ] || [ "$cls" = f32 ] && fails=$((fails + 1))
    done
  done
done
echo "failures: $fails"
[ $fails -eq 0 ]
