#!/usr/bin/env bash
# ctest entry: strata's Jinja engine (`strata apply-template --jinja`) against @huggingface/jinja on
# every chat template llama.cpp v0.5.0 ships in models/templates/ (taken from the llama.cpp source
# node-llama-cpp@3.22.1 carries as a git bundle; fetched with npm at test time into CACHE,
# build/npm-cache, kept between runs; never committed). tests/text/jinja_npm.mjs renders a set of
# conversations with both and requires equal strings wherever @huggingface/jinja renders one.
# Without node / npm / git or the registry: skipped (exit 77), failed when CI=true.
# Usage: jinja_npm.sh STRATA CACHE
set -euo pipefail
strata=$1
mkdir -p "$2"
cache=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

source "$here/../npm_fetch.sh"
npm_require_node
npm_fetch "$cache" @huggingface/jinja@0.5.13 hf-jinja
npm_llama_templates "$cache"
tdir="$cache/llama.cpp-v0.5.0/templates"

node "$here/jinja_npm.mjs" "$strata" "$cache" "$tdir"
