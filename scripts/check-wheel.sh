#!/bin/sh
# Install redline the way users do: build the wheel with the standard frontend, install it
# non-editable into a fresh venv, and run the demo and one LSP initialize from that install.
# `pip install -e` would hide a module the wheel leaves out.
set -eu
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
# setuptools builds in the checkout (build/, redline.egg-info/): removed after unless they were there.
leftovers=""
for d in build redline.egg-info; do [ -e "$d" ] || leftovers="$leftovers $root/$d"; done
trap 'rm -rf "$work" $leftovers' EXIT

python3 -m venv "$work/build"
"$work/build/bin/pip" install -q build
"$work/build/bin/python" -m build --wheel --outdir "$work/dist" "$root" >"$work/build.log" 2>&1 \
  || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/redline-*.whl)
echo "built $(basename "$wheel")"

python3 -m venv "$work/user"
"$work/user/bin/pip" install -q "$wheel[demo]"
# Outside the checkout, so nothing imports the working tree by accident.
cd "$work"
"$work/user/bin/redline" demo
"$work/user/bin/python" "$root/scripts/lsp_initialize.py" "$work/user/bin/redline" serve
