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
command -v git >/dev/null 2>&1 || npm_skip "git not found (it reads the templates from node-llama-cpp's git bundle)"

npm_fetch "$cache" @huggingface/jinja@0.5.13 hf-jinja

# All of models/templates/*.jinja from node-llama-cpp's llama/gitRelease.bundle (llama.cpp's source
# at the release it builds, v0.5.0). Fetched once; the 35 MB package is dropped once they are kept.
tdir="$cache/llama.cpp-v0.5.0/templates"
if [ ! -f "$tdir/.complete" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  npm_pack_into "$tmp" node-llama-cpp@3.22.1
  tar xzf "$tmp/$(head -n 1 "$tmp/names")" -C "$tmp" package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json ||
    npm_skip "node-llama-cpp@3.22.1 has no llama/gitRelease.bundle"
  grep -q '"v0.5.0"' "$tmp/package/llama/binariesGithubRelease.json" ||
    npm_skip "node-llama-cpp@3.22.1 does not carry llama.cpp v0.5.0: $(cat "$tmp/package/llama/binariesGithubRelease.json")"
  git init -q --bare "$tmp/src.git"
  git -C "$tmp/src.git" fetch -q "$tmp/package/llama/gitRelease.bundle" HEAD:refs/heads/release
  mkdir -p "$tmp/templates"
  git -C "$tmp/src.git" ls-tree --name-only release models/templates/ | grep '\.jinja$' | while read -r f; do
    git -C "$tmp/src.git" show "release:$f" >"$tmp/templates/$(basename "$f")"
  done
  touch "$tmp/templates/.complete"
  rm -rf "$tdir"
  mkdir -p "$(dirname "$tdir")"
  mv -T "$tmp/templates" "$tdir"
  rm -rf "$tmp"
fi

node "$here/jinja_npm.mjs" "$strata" "$cache" "$tdir"
