#!/usr/bin/env bash
# Installs strata's build and test dependencies from Debian 12 packages (only what is missing).
# The Vulkan ones (headers, glslc, Mesa's lavapipe to run Vulkan on the CPU, the validation
# layer) are optional for a build: without them the Vulkan device is left out and its tests say so.
# libssl-dev: TLS for `strata serve` (optional too); openssl: the TLS test's self-signed certificate;
# chromium: the dashboard's headless browser test (skipped without it, except with CI=true).
# nodejs, npm, git: the tests that check strata against npm packages fetched at test time
# (tests/npm_fetch.sh; a node / npm already on PATH, e.g. NodeSource's, is used as it is).
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libgtest-dev libbenchmark-dev clang-format-14 clang-14 libclang-rt-14-dev
      libpcre2-dev libicu-dev liburing-dev nlohmann-json3-dev libcpp-httplib-dev libboost-dev libcli11-dev libfmt-dev python3-numpy
      libssl-dev openssl chromium
      libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
command -v git >/dev/null 2>&1 || pkgs+=(git)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
