#!/bin/sh
# System packages the tests use: bubblewrap (the evaluator's sandbox), Neovim (a second LSP
# editor the server is tested against) and capsh (libcap2-bin: attaching without the capability
# to read another process, as an unprivileged user would). Installed with apt where
# this runs as root on Debian/Ubuntu; elsewhere it only says what is missing (the evaluator then
# falls back to Python-only isolation and records that in its reports).
set -u
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v nvim >/dev/null 2>&1 || missing="$missing neovim"
command -v capsh >/dev/null 2>&1 || missing="$missing libcap2-bin"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q $missing >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $missing >/dev/null 2>&1; } \
    || echo "system-deps: could not install$missing" >&2
else
  echo "system-deps: missing$missing (install with your package manager for full sandboxing)" >&2
fi
exit 0
