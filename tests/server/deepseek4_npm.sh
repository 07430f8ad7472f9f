#!/usr/bin/env bash
# ctest entry: the DeepSeek-V4 chat path against external oracles fetched with npm at test time
# (into CACHE, build/npm-cache, kept between runs; never committed):
#   - llama.cpp v0.5.0's models/templates/deepseek-ai-DeepSeek-V4.jinja, taken from the llama.cpp
#     source that node-llama-cpp@3.22.1 ships as a git bundle (tests/npm_fetch.sh), rendered
#     by @huggingface/jinja for a set of conversations (system, tools, thinking on / off, multi-turn,
#     tool calls and results) and compared with what `strata serve`'s /apply-template renders;
#   - the official `openai` client's chat.completions.create (non-streamed and streamed) against
#     `strata serve -m DIR` on a DeepSeek-V4.1 checkpoint directory (fixtures-v41's sparse model plus
#     a tokenizer.json written by the test), whose chat format must be deepseek4.
# Without node / npm / git or the registry: skipped (exit 77), failed when CI=true; without
# fixtures-v41 the templates are compared on the bundled smoke model (--chat-template deepseek4)
# and the client part is skipped (failed when CI=true).
# Usage: deepseek4_npm.sh STRATA CACHE FIXTURES_V41_DEFAULT SMOKE_GGUF
set -euo pipefail
strata=$1
cache=$2
v41=${STRATA_FIXTURES_V41:-$3}
smoke=$4
here=$(cd "$(dirname "$0")" && pwd)

source "$here/../npm_fetch.sh"
npm_require_node
npm_fetch "$cache" @huggingface/jinja@0.5.13 hf-jinja openai@6.30.1 openai
npm_llama_templates "$cache"
tmpl="$cache/llama.cpp-v0.5.0/templates/deepseek-ai-DeepSeek-V4.jinja"

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-ds4npm.XXXXXX")
trap 'rm -rf "$work"' EXIT
sparse=""
if [ -f "$v41/sparse/model.safetensors" ]; then
  sparse="$v41/sparse"
elif [ "${CI:-}" = "true" ]; then
  echo "FAIL (CI=true): fixtures-v41 not found ($v41; set STRATA_FIXTURES_V41)"
  exit 1
else
  echo "fixtures-v41 not found ($v41): templates compared on $smoke, the openai client part is not run"
fi
node "$here/deepseek4_npm.mjs" "$strata" "$cache" "$tmpl" "$work" "$smoke" "$sparse"
