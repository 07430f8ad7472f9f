#!/usr/bin/env bash
# Side-by-side speed of llama.cpp and strata on the same GGUF files, interleaved (A B A B ...) so
# a noisy, shared machine slows both alike. Prints per model the medians of pp and tg tokens/s
# over all timed repetitions of both tools, strata / llama.cpp ratios, and strata's tg bandwidth
# as a fraction of the measured read bandwidth.
#
#   bench/compare.sh LLAMA_BENCH_BINARY MODEL.gguf [MODEL.gguf ...]
# Environment: THREADS (2), N_PROMPT (64), N_GEN (32), REPS (3 per run), ROUNDS (3 A/B pairs),
#   STRATA (strata binary; default build/perf/tools/strata, then build/tools/strata),
#   OUT (directory for the raw JSON; default a temp dir, kept).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
LLAMA_BENCH=$1
shift
here=$(cd "$(dirname "$0")/.." && pwd)
THREADS=${THREADS:-2}
N_PROMPT=${N_PROMPT:-64}
N_GEN=${N_GEN:-32}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-3}
if [[ -z ${STRATA:-} ]]; then
  for c in "$here/build/perf/tools/strata" "$here/build/tools/strata"; do
    [[ -x $c ]] && STRATA=$c && break
  done
fi
[[ -x ${STRATA:-} ]] || { echo "compare.sh: no strata binary (set STRATA=...)" >&2; exit 2; }
[[ -x $LLAMA_BENCH ]] || { echo "compare.sh: $LLAMA_BENCH is not executable" >&2; exit 2; }
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
OUT=${OUT:-$(mktemp -d /tmp/strata-compare.XXXXXX)}
mkdir -p "$OUT"
for m in "$@"; do
  [[ -f $m ]] || { echo "compare.sh: no such model: $m" >&2; exit 2; }
done

echo "# strata vs llama.cpp: threads $THREADS, pp$N_PROMPT, tg$N_GEN, $REPS reps x $ROUNDS interleaved rounds"
echo "# strata: $STRATA; llama-bench: $LLAMA_BENCH; raw JSON in $OUT"
i=0
for m in "$@"; do
  i=$((i + 1))
  for r in $(seq 1 "$ROUNDS"); do
    "$LLAMA_BENCH" -m "$m" -p "$N_PROMPT" -n "$N_GEN" -t "$THREADS" -r "$REPS" -o json \
      > "$OUT/m${i}_r${r}_llama.json" 2> "$OUT/m${i}_r${r}_llama.err" ||
      { echo "compare.sh: llama-bench failed on $m (see $OUT/m${i}_r${r}_llama.err)" >&2; exit 1; }
    "$STRATA" bench -m "$m" -p "$N_PROMPT" -n "$N_GEN" -t "$THREADS" -r "$REPS" --json \
      > "$OUT/m${i}_r${r}_strata.json" 2> "$OUT/m${i}_r${r}_strata.err" ||
      { echo "compare.sh: strata bench failed on $m (see $OUT/m${i}_r${r}_strata.err)" >&2; exit 1; }
  done
done

"$PY" - "$OUT" "$ROUNDS" "$N_PROMPT" "$N_GEN" "$@" <<'EOF'
import json, statistics, sys
out, rounds, n_prompt, n_gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
models = sys.argv[5:]
rows = []
for i, m in enumerate(models, 1):
    lp, lt, sp, st, frac, gbps, bw = [], [], [], [], [], [], []
    for r in range(1, rounds + 1):
        for t in json.load(open(f"{out}/m{i}_r{r}_llama.json")):
            if t["n_prompt"] > 0 and t["n_gen"] == 0:
                lp += t["samples_ts"]
            elif t["n_gen"] > 0 and t["n_prompt"] == 0:
                lt += t["samples_ts"]
        s = json.load(open(f"{out}/m{i}_r{r}_strata.json"))
        sp += s["pp"]["samples_ts"] if n_prompt else []
        st += s["tg"]["samples_ts"] if n_gen else []
        frac.append(s["tg_fraction_of_membw"]); gbps.append(s["tg_gbps"]); bw.append(s["membw_gbps"])
    med = lambda v: statistics.median(v) if v else float("nan")
    rows.append((m.split("/")[-1], s.get("type", "?"), med(lp), med(sp), med(lt), med(st),
                 med(gbps), med(bw), med(frac)))
print(f"| {'model':28} | {'type':6} | {'llama pp':>9} | {'strata pp':>9} | {'pp ratio':>8} | "
      f"{'llama tg':>9} | {'strata tg':>9} | {'tg ratio':>8} | {'tg GB/s':>7} | {'membw':>6} | {'tg/bw':>6} |")
print("|" + "-" * 140 + "|")
for name, ty, lp, sp, lt, st, g, b, f in rows:
    print(f"| {name[:28]:28} | {ty:6} | {lp:9.2f} | {sp:9.2f} | {sp / lp:7.2f}x | {lt:9.2f} | {st:9.2f} | "
          f"{st / lt:7.2f}x | {g:7.2f} | {b:6.2f} | {100 * f:5.1f}% |")
print("(t/s medians over all interleaved runs; tg/bw: strata's estimated tg weight "
      "bytes/token x tg t/s over `strata bench --membw`)")
EOF
