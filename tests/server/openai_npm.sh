#!/usr/bin/env bash
# ctest entry: `strata serve` through the official `openai` npm client, a check per feature
# (tests/server/openai_npm.mjs: logprobs vs `strata logits`, n = 4 vs its n = 1 twins, JSON-schema
# output that validates, tool calls in five syntaxes streamed and not). The client is fetched with
# npm at test time into CACHE (build/npm-cache, kept between runs; never committed). Without node /
# npm or the registry: skipped (exit 77), failed when CI=true.
# Usage: openai_npm.sh STRATA CACHE MODEL RUNS
set -euo pipefail
strata=$1
cache=$2
model=$3
runs=${4:-100}
here=$(cd "$(dirname "$0")" && pwd)

source "$here/../npm_fetch.sh"
npm_require_node
npm_fetch "$cache" openai@6.30.1 openai

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-openai.XXXXXX")
trap 'rm -rf "$work"' EXIT
node "$here/openai_npm.mjs" "$strata" "$cache" "$model" "$work" "$runs"
