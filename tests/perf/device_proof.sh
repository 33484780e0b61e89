#!/bin/sh
# The device runs behind the GPU claims in docs/ (trust-model.md, performance.md), one part per call
# of the lent machine (each part fits its 600 s limit); results go under $OUT.
#   sh tests/perf/device_wheels.sh                    # here, once: the wheels the image lacks
#   run (carry .whl):  . tests/perf/device_env.sh; sh tests/perf/device_proof.sh PART [ARGS]
# Parts:
#   gpu-tests [N]      tests/test_gpu.py N times in a row (default 3): each run's log and reports in
#                      $OUT/gpu-tests.tar.gz, one summary line per run in $OUT/gpu-tests.txt
#   sanitizer          compute-sanitizer memcheck and racecheck logs of the checked kernels and an
#                      honest one (tests/gpu/sanitize_one.py) in $OUT/sanitizer.tar.gz, for
#                      tests/fixtures/sanitizer/
#   kernelbench NAMES  tests/perf/bench_kernelbench.py on NAMES (comma-separated, or all) with the
#                      default 60 s time limit; its reports in $OUT/kernelbench.tar.gz
set -u
: "${OUT:?set OUT to the folder that comes back}"
part=${1:?which part: gpu-tests, sanitizer or kernelbench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/device.txt" 2>&1

case "$part" in
gpu-tests)
  runs=${2:-3}
  mkdir -p /tmp/proof
  i=1
  while [ "$i" -le "$runs" ]; do
    d=/tmp/proof/gpu-run-$i
    mkdir -p "$d"
    REDLINE_GPU_OUT="$d" python3 -m pytest -q -p no:cacheprovider -rA tests/test_gpu.py > "$d/pytest.log" 2>&1
    echo "run $i: exit $? $(tail -n 1 "$d/pytest.log")" >> "$OUT/gpu-tests.txt"
    tar -C /tmp/proof -czf "$OUT/gpu-tests.tar.gz" .  # after every run: the machine can be taken back
    i=$((i + 1))
  done
  ;;
sanitizer)
  d=/tmp/proof/sanitizer
  mkdir -p "$d"
  for pair in memcheck:oob_write memcheck:shared_race racecheck:shared_race memcheck:clean racecheck:clean initcheck:clean; do
    tool=${pair%%:*}
    name=${pair#*:}
    src=tests/gpu/checked/$name.py
    [ "$name" = clean ] && src=tests/gpu/candidates/triton_fused.py
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool "$tool" --log-file "$d/${tool}_$name.log" \
      python3 tests/gpu/sanitize_one.py "$src" > "$d/${tool}_$name.out" 2>&1
    echo "$tool $name: exit $?" >> "$d/exits.txt"
    tar -C "$d" -czf "$OUT/sanitizer.tar.gz" .
  done
  ;;
kernelbench)
  mkdir -p /tmp/proof/kb
  python3 tests/perf/bench_kernelbench.py "${2:-all}" /tmp/proof/kb 60 2>&1 | tee "$OUT/kernelbench.txt"
  tar -C /tmp/proof/kb -czf "$OUT/kernelbench.tar.gz" .
  ;;
*)
  echo "unknown part: $part" >&2
  exit 2
  ;;
esac
