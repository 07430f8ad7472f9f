#!/usr/bin/env bash
# Build the GGUF libFuzzer target (clang-14, ASan + UBSan) and run it for N seconds on one core.
#   scripts/fuzz_gguf.sh [seconds=600] [extra libFuzzer flags...]
# Seeds are generated at run time (fuzz/gguf_fuzz_seeds) from synthetic files and, when present,
# the shared fixtures shrunk to a few KiB each. New coverage goes to build/fuzz/fuzz/corpus; a crash
# leaves crash-* in build/fuzz/fuzz (reproduce: build/fuzz/fuzz/gguf_fuzz <crash-file>).
set -euo pipefail
secs=${1:-600}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
build=${STRATA_FUZZ_BUILD:-$root/build/fuzz}
fixtures=${STRATA_FIXTURES:-$root/../shared/fixtures}

CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS=OFF \
  -DSTRATA_BUILD_BENCH=OFF -DSTRATA_SANITIZE=ON >/dev/null
ninja -C "$build" -j"${STRATA_JOBS:-2}" gguf_fuzz gguf_fuzz_seeds

out=$build/fuzz
seeds=$out/seeds
corpus=$out/corpus
mkdir -p "$corpus"
inputs=()
if [ -d "$fixtures/models" ]; then inputs=("$fixtures"/models/*.gguf "$fixtures"/vocab/*.gguf); fi
"$out/gguf_fuzz_seeds" "$seeds" "${inputs[@]}"

cd "$out"
# -jobs=1: one fuzzing process (a single core); its log is fuzz-0.log.
status=0
./gguf_fuzz -jobs=1 -workers=1 -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 "$@" "$corpus" "$seeds" || status=$?
tail -n 25 fuzz-0.log || true
exit $status
