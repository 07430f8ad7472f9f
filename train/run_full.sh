#!/bin/bash
# The full pipeline for strata's bundled MoE, resumable at every stage. Run from anywhere:
#   train/run_full.sh [minutes-of-training-this-sitting]      (default 100)
# Stages skip themselves when their output exists; training resumes from $RUN_DIR/ckpt.pt, and once
# the run reaches $STEPS it exports, evaluates, writes fixtures and the model card.
# Uses both cores: run it when nobody else is compiling.
# Environment (defaults in brackets): THREADS [2], STEPS [3600; 8 x 512 = 4096 tokens/step, ~90 min at
# 2.8k tok/s], TRAIN_ARGS [""; extra train.py flags, e.g. a tiny shape for a dry run], RUN_DIR
# [build/data/runs/main], NAME [strata-moe-31m], MODEL_DIR [models], FIXTURES [tests/data/bundled_moe].
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3                 # the python3 first on PATH lacks numpy/torch
DATA=$ROOT/build/data               # git-ignored
MIN=${1:-100}
THREADS=${THREADS:-2}
STEPS=${STEPS:-3600}
TRAIN_ARGS=${TRAIN_ARGS:-}
RUN_DIR=${RUN_DIR:-$DATA/runs/main}
NAME=${NAME:-strata-moe-31m}
MODEL_DIR=${MODEL_DIR:-$ROOT/models}
FIXTURES=${FIXTURES:-$ROOT/tests/data/bundled_moe}
SP=$DATA/tokenizer/strata_sp4096.model
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE

[ -f "$DATA/corpus/stats.json" ] || $PY "$ROOT/train/corpus.py" --out "$DATA/corpus"
[ -f "$SP" ] || $PY "$ROOT/train/tokenizer.py" train --corpus "$DATA/corpus"
[ -f "$DATA/corpus/valid/web.bin" ] || $PY "$ROOT/train/tokenizer.py" encode --corpus "$DATA/corpus"

# shellcheck disable=SC2086
$PY "$ROOT/train/train.py" --data "$DATA/corpus" --run-dir "$RUN_DIR" --steps "$STEPS" \
    --threads "$THREADS" --time-limit "$MIN" $TRAIN_ARGS 2>&1 | tee -a "$RUN_DIR.log"

STEP=$($PY -c "import torch; print(torch.load('$RUN_DIR/ckpt.pt')['step'])")
if [ "$STEP" -lt "$STEPS" ]; then
    echo "stopped at step $STEP of $STEPS: run train/run_full.sh again to continue"; exit 0
fi
F16=$DATA/$NAME-f16.gguf
Q=$MODEL_DIR/$NAME-mxfp4.gguf       # committed (<= 25 MiB): MXFP4 experts + Q8_0 dense
mkdir -p "$MODEL_DIR" "$DATA/fixtures"
$PY "$ROOT/train/export_gguf.py" --ckpt "$RUN_DIR/ckpt.pt" --out "$F16" --type f16 --name "$NAME"
$PY "$ROOT/train/export_gguf.py" --ckpt "$RUN_DIR/ckpt.pt" --out "$Q" --type mxfp4_moe --name "$NAME"
for m in "$F16" "$Q"; do
    stem=$(basename "$m" .gguf)
    for s in austen devil kjv tdavid web; do
        $PY "$ROOT/train/reference_forward.py" ppl -m "$m" --f32 --threads "$THREADS" \
            --bin "$DATA/corpus/valid/$s.bin" -o "$DATA/ref_ppl_${stem}_$s"
    done
    $PY "$ROOT/train/reference_forward.py" ppl -m "$m" --f32 --threads "$THREADS" \
        --text "$DATA/corpus/valid.txt" -o "$DATA/ref_ppl_${stem}_all"
done
# Fixtures: the committed quantized model (tests/data, committed) and the F16 export (build/, local).
$PY "$ROOT/train/make_fixtures.py" -m "$Q" --prefix "$FIXTURES" --threads "$THREADS"
$PY "$ROOT/train/make_fixtures.py" -m "$F16" --prefix "$DATA/fixtures/$(basename "$FIXTURES")_f16" --threads "$THREADS"
$PY "$ROOT/train/model_card.py" --run-dir "$RUN_DIR" --f16 "$NAME-f16" --quant "$Q" --out "$MODEL_DIR/README.md"
echo "done: $F16, $Q, $FIXTURES*, $MODEL_DIR/README.md"
