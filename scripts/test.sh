#!/usr/bin/env bash
# The test command (README): format check, release build + full suite, then the suite under ASan+UBSan.
# Usage: scripts/test.sh [--quick]   (--quick: release build and suite only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== clang-format check"
files=$(git ls-files 'src/*.h' 'src/*.cpp' 'tools/*.h' 'tools/*.cpp' 'tests/*.h' 'tests/*.cpp' 'bench/*.cpp' 'fuzz/*.cpp')
if [ -n "$files" ]; then
  clang-format-14 --dry-run --Werror $files
fi

echo "== release build"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release -j "$jobs"
(cd build/release && ctest --output-on-failure -j "$jobs")

if [ "${1:-}" = "--quick" ]; then exit 0; fi

echo "== ASan + UBSan build"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=ON -DSTRATA_BUILD_BENCH=OFF >/dev/null
ninja -C build/asan -j "$jobs"
(cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs")
