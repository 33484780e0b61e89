#!/bin/sh
# The device runs behind the GPU claims in docs/ (trust-model.md, performance.md), one part per call
# of the lent machine (each part fits its 600 s limit); results go under $OUT.
#   sh tests/perf/device_wheels.sh                    # here, once: the wheels the image lacks
#   run (carry .whl):  . tests/perf/device_env.sh; sh tests/perf/device_proof.sh PART [ARGS]
# Parts:
#   gpu-tests [N] [GROUPS]  tests/test_gpu.py N times in a row (default 1), group by group (GROUPS:
#                      comma-separated, of candidates checked compiling racing builtin graph attention; default
#                      all), each group its own pytest run with a 500 s limit per test; each run's log
#                      written to $OUT/gpu-run-N.log as it goes (a call stopped at its limit still
#                      returns what ran), one line per group in $OUT/gpu-tests.txt, reports in
#                      $OUT/gpu-tests.tar.gz
#   sanitizer [PAIRS]  compute-sanitizer logs of the checked kernels and an honest one, each run by
#                      tests/gpu/sanitize_one.py (PAIRS: comma-separated TOOL:NAME, default all six;
#                      NAME clean is the honest one) in $OUT/sanitizer.tar.gz, for tests/fixtures/sanitizer/
#   kernelbench NAMES [S]  tests/perf/bench_kernelbench.py on NAMES (comma-separated, or all) with a
#                      time limit of S s (default 60); each problem's row printed to
#                      $OUT/kernelbench.txt as it ends, reports in $OUT/kernelbench.tar.gz
set -u
: "${OUT:?set OUT to the folder that comes back}"
part=${1:?which part: gpu-tests, sanitizer or kernelbench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/device.txt" 2>&1

case "$part" in
gpu-tests)
  runs=${2:-1}
  groups=$(echo "${3:-candidates,checked,compiling,racing,builtin,graph,attention}" | tr ',' ' ')
  i=1
  while [ "$i" -le "$runs" ]; do
    d=/tmp/proof/gpu-run-$i
    mkdir -p "$d"
    for g in $groups; do
      case "$g" in
      candidates) k="status_and_reason or winner_with or nsight or against_torch_compile" ;;
      checked) k="reject_what_outputs or device_assert" ;;
      compiling) k="honest_compiling" ;;
      racing) k="racing_stream" ;;
      builtin) k="builtin_gpu_proposers" ;;
      graph) k="launch_bound" ;;
      attention) k="attention" ;;
      *) echo "unknown group: $g" >&2; exit 2 ;;
      esac
      t0=$(date +%s)
      REDLINE_GPU_OUT="$d" python3 -m pytest -v -p no:cacheprovider -rA --durations=0 --timeout 500 \
        tests/test_gpu.py -k "$k" >> "$OUT/gpu-run-$i.log" 2>&1
      rc=$?
      echo "run $i $g: exit $rc in $(( $(date +%s) - t0 )) s: $(tail -n 1 "$OUT/gpu-run-$i.log")" >> "$OUT/gpu-tests.txt"
      tar -C /tmp/proof -czf "$OUT/gpu-tests.tar.gz" .  # after every group: the machine can be taken back
    done
    i=$((i + 1))
  done
  ;;
sanitizer)
  d=/tmp/proof/sanitizer
  mkdir -p "$d"
  pairs=$(echo "${2:-memcheck:oob_write,racecheck:shared_race,memcheck:clean,initcheck:clean,racecheck:clean,memcheck:shared_race}" | tr ',' ' ')
  for pair in $pairs; do
    tool=${pair%%:*}
    name=${pair#*:}
    src=tests/gpu/checked/$name.py
    [ "$name" = clean ] && src=tests/gpu/candidates/triton_fused.py
    t0=$(date +%s)
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool "$tool" --log-file "$d/${tool}_$name.log" \
      python3 tests/gpu/sanitize_one.py "$src" > "$d/${tool}_$name.out" 2>&1
    echo "$tool $name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$d/exits.txt" >> "$OUT/sanitizer.txt"
    tar -C "$d" -czf "$OUT/sanitizer.tar.gz" .
  done
  ;;
kernelbench)
  mkdir -p /tmp/proof/kb
  python3 tests/perf/bench_kernelbench.py "${2:-all}" /tmp/proof/kb "${3:-60}" 2>&1 | tee -a "$OUT/kernelbench.txt"
  tar -C /tmp/proof/kb -czf "$OUT/kernelbench.tar.gz" .
  ;;
*)
  echo "unknown part: $part" >&2
  exit 2
  ;;
esac
