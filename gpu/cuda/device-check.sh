#!/usr/bin/env bash
# device-check.sh: everything the GPU machine checks in one call (it has nvcc, cuBLAS, PyTorch and
# transformers but no Go of its own). Two ways to bring the Go side:
#   - a Go toolchain: ../shared/device/pack-go ./gpu/... , carry .gotool; the test binary is built there;
#   - a prebuilt test binary: bash gpu/cuda/prebuild-test.sh here, carry .devbin, run with
#     DEVBIN=.devbin; only the kernels are compiled there (into .devbin/lib/libt2cuda.so). Use this
#     when the working tree plus .gotool would exceed the device tool's 64 MiB.
#
#   bash gpu/cuda/device-check.sh [test|sanitize|bench|torch]...   (default: all four)
#
# Logs and JSON reports go to $OUT (or ./gpu-report); each stage has its own time limit (T_TEST,
# T_SAN, T_BENCH, T_TORCH seconds) so one slow stage cannot eat the others' time; T2_TEST_RUN,
# T2_SAN_RUN and T2_BENCH_RUN (Go test/benchmark regexps), T2_SAN_TOOLS (default "memcheck
# racecheck"), T2_BENCH_SHAPES and T2_TORCH_SHAPES narrow the stages. The bench stage samples the
# clocks and power while it runs (clocks-bench$T2_CLOCKS_TAG.csv; T2_CLOCKS_TAG names a second
# bench run in the same $OUT); `go run ./gpu/cuda/powertrace/powerplot -o FIG.png FILE.csv` draws
# one where Go is.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd) # gpu/cuda, for sample-clocks.sh after the cd below
cd "$here/../.."
OUT=${OUT:-$PWD/gpu-report}
mkdir -p "$OUT"
export T2_REPORT_DIR=$OUT PYTHONUNBUFFERED=1
DEVBIN=${DEVBIN:-}
[[ -z $DEVBIN && -f .gotool/enter.sh ]] && source .gotool/enter.sh
stages=("$@")
((${#stages[@]})) || stages=(test sanitize bench torch)
has() { [[ " ${stages[*]} " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit,power.max_limit,temperature.gpu --format=csv | tee "$OUT/device.txt"
nvcc --version | tail -1 | tee -a "$OUT/device.txt"
if [[ -n $DEVBIN ]]; then
  cudalib=${CUDA_HOME:-/usr/local/cuda}/lib64
  mkdir -p "$DEVBIN/lib"
  make -f gpu/cuda/gpu.mk -j16 gpu/cuda/build/libt2cuda.so >"$OUT/build.log" 2>&1 &&
    cp gpu/cuda/build/libt2cuda.so "$DEVBIN/lib/" ||
    { grep -E -A3 'error' "$OUT/build.log" | head -40; echo "BUILD FAILED"; exit 1; }
  export LD_LIBRARY_PATH=$PWD/$DEVBIN/lib:$cudalib:${LD_LIBRARY_PATH:-}
  testbin=$PWD/$DEVBIN/cuda.test
  # the binary finds pytorch/check.py at the path it was compiled in (runtime.Caller)
  src=$(strings "$testbin" | grep -m1 -o '/[^ ]*/gpu/cuda/backend_test.go' || true)
  root=${src%/gpu/cuda/backend_test.go}
  if [[ -n $root && ! -e $root ]]; then mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"; fi
else
  make -f gpu/cuda/gpu.mk -j8 gpu 2>&1 | tail -5 || { echo "BUILD FAILED"; exit 1; }
  export CGO_ENABLED=1 CGO_LDFLAGS="-L${CUDA_HOME:-/usr/local/cuda}/lib64 ${CGO_LDFLAGS:-}"
  testbin=/tmp/cuda.test
  go test -tags cuda -c -o $testbin ./gpu/cuda/ || { echo "TEST BUILD FAILED"; exit 1; }
fi
cd gpu/cuda # where `go test` runs a package's tests
rc=0
if has test; then
  timeout ${T_TEST:-300} $testbin -test.v -test.count=1 -test.run "${T2_TEST_RUN:-.}" 2>&1 | tee "$OUT/test.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|check.py|go .*torch|PASS|FAIL|error|attention_test|optstate_test' | grep -v '^=== RUN' | head -80
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if has sanitize; then
  for tool in ${T2_SAN_TOOLS:-memcheck racecheck}; do
    tests='TestMatchesCPUReference|TestRecomputeAndChunking|TestStepIsAdamW|TestGradientsAfterStep|TestShardStepLeavesGradientsStale'
    [[ $tool == racecheck ]] && tests='TestRecomputeAndChunking|TestStepIsAdamW'
    tests=${T2_SAN_RUN:-$tests}
    timeout ${T_SAN:-240} compute-sanitizer --tool $tool --error-exitcode 3 $testbin -test.count=1 \
      -test.run "$tests" >"$OUT/sanitize-$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $?"; grep -E 'SUMMARY|^(ok|PASS|FAIL|--- FAIL)' "$OUT/sanitize-$tool.log" | tail -4
  done
fi
# clocks NAME CMD...: runs CMD under sample-clocks.sh (nvidia-smi reads the SM clock, power draw
# and the clock-event reasons every 50 ms; the clocks stay as the machine has them) into
# $OUT/clocks-NAME.csv, then prints one line over the busy samples (power above a third of the
# limit): median and 10th-percentile SM clock, median power, and the share of samples the driver
# marked as held back by the software power cap (reason bit 0x4) or by heat (0x20, 0x40, 0x8).
# gpu/cuda/powertrace computes the same line in Go (its test holds the two to one golden file);
# this copy stays in Python because the GPU machine has no Go.
# Kernels timed alone and inside a training step run at different clocks when the step is
# power-bound; this is what tells the two apart.
clocks() {
  local name=$1 csv="$OUT/clocks-$1.csv" rc
  shift
  bash "$here/sample-clocks.sh" "$csv" "$@"
  rc=$?
  python3 - "$csv" "$name" <<'PY'
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        rows.append((float(f[1]), float(f[2]), float(f[3]), float(f[4]), int(f[5], 16)))
    except (ValueError, IndexError):
        pass
busy = [r for r in rows if r[1] > r[2] / 3]
if not busy:
    print(f"clocks {sys.argv[2]}: no busy samples ({len(rows)} read)")
    sys.exit()
sm = sorted(r[0] for r in busy)
cap = sum(1 for r in busy if r[4] & 0x4) / len(busy)
heat = sum(1 for r in busy if r[4] & 0x68) / len(busy)
print(f"clocks {sys.argv[2]}: {len(busy)} busy samples, SM clock median {statistics.median(sm):.0f} MHz "
      f"(p10 {sm[len(sm) // 10]:.0f}), power median {statistics.median(r[1] for r in busy):.0f} W of "
      f"{busy[0][2]:.0f}, power-capped {100 * cap:.0f}%, heat-slowed {100 * heat:.0f}%, "
      f"max {max(r[3] for r in busy):.0f} C")
PY
  return $rc
}
if has bench; then
  clocks "bench${T2_CLOCKS_TAG:-}" timeout ${T_BENCH:-420} $testbin -test.run '^$' -test.bench "${T2_BENCH_RUN:-.}" \
    -test.benchtime ${GPU_BENCHTIME:-3x} 2>&1 | tee -a "$OUT/bench.log" | grep -E 'Benchmark|ok|FAIL|^clocks'
fi
if has torch; then
  timeout ${T_TORCH:-420} python3 pytorch/bench.py 2>&1 | tail -12 | tee "$OUT/torch-bench.log"
fi
exit $rc
