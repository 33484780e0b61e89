#!/bin/sh
# Installs what the end-to-end test needs on a Debian machine: code-server's build dependencies,
# Debian's chromium and ripgrep, then code-server and playwright-core from npm. code-server's
# ripgrep download (GitHub) is served from Debian's ripgrep through @vscode/ripgrep's own cache.
set -eu
cd "$(dirname "$0")"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  for pkg in build-essential pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev ripgrep chromium; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    apt-get install -y -q $missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null; }
  fi
fi
command -v rg >/dev/null || { echo "e2e setup: ripgrep (rg) is needed" >&2; exit 1; }
cache="$(node -e 'console.log(require("os").tmpdir())')/vscode-ripgrep-cache-1.15.11"
mkdir -p "$cache"
asset="$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
if [ ! -f "$asset" ]; then
  tmp=$(mktemp -d)
  cp "$(command -v rg)" "$tmp/rg"
  tar -C "$tmp" -czf "$asset" rg
  rm -rf "$tmp"
fi
if [ ! -x node_modules/.bin/code-server ]; then
  npm_config_yes=true npm_config_unsafe_perm=true npm ci --no-audit --no-fund 2>&1 | grep -v "Unknown env config\|Unknown cli config" || true
fi
test -x node_modules/.bin/code-server
