# Source on the lent GPU machine (see docs/performance.md): makes `redline` importable from this
# checkout with the image's python3, installing the wheels carried in .whl/ (pure-Python
# dependencies the image lacks) into /tmp/site.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
mkdir -p /tmp/pkg && ln -sfn "$PWD" /tmp/pkg/redline
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONUNBUFFERED=1
export REDLINE_GPU_OUT="${OUT:-/tmp}"
