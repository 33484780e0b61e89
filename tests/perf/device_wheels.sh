#!/bin/sh
# Run here (not on the GPU machine), from the repository root: fetches the wheels that the lent GPU
# machine's image (Python 3.12, torch, triton, no registry access) lacks for redline into .whl/, and
# (ignored by git; carry it: see tests/perf/device_env.sh and docs/performance.md).
set -eu
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
for p in pydantic==2.12.5 pydantic-core==2.41.5 annotated-types typing-inspection tree-sitter tree-sitter-python \
         openai jiter distro sniffio pygls lsprotocol cattrs; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any -d .whl "$p"
done
