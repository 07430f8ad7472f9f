#!/usr/bin/env bash
# Sets up strata on a fresh Debian 12 machine and runs the default model.
# Until the bundled trained model lands (models/), the default model is a seeded random-weight
# qwen3moe made by `strata synth` (its text is gibberish; the point is the whole path runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release strata
model=build/models/default-qwen3moe-q8_0.gguf
if [ ! -f "$model" ]; then
  mkdir -p build/models
  ./build/release/tools/strata synth --arch qwen3moe --layers 4 --embd 512 --heads 8 --kv-heads 2 \
    --experts 16 --top-k 2 --expert-ffn 256 --vocab 4096 --type q8_0 --seed 1 -o "$model"
fi
./build/release/tools/strata run -m "$model" -p "${1:-Once upon a time}" -n "${2:-48}" --seed 42
