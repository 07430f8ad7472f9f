#!/usr/bin/env bash
# Sets up strata on a fresh Debian 12 machine and runs the bundled model: strata-moe-31m, a
# Mixture-of-Experts (16 experts, top-2) trained from scratch by train/ on public-domain text
# (models/README.md is its card), MXFP4 experts + Q8_0 dense, 18 MiB, committed in models/.
#   bash scripts/run-default.sh ["prompt"] [tokens]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release strata
./build/release/tools/strata run -m models/strata-moe-31m-mxfp4.gguf -p "${1:-It is a truth universally acknowledged}" \
  -n "${2:-64}" --temp 0.7 --top-p 0.9 --seed 42
