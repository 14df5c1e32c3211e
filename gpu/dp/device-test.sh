#!/usr/bin/env bash
# device-test.sh: gpu/dp's -tags cuda tests and multi-GPU measurements (docs/MULTIGPU.md) on a GPU
# machine without Go.
#
#   bash gpu/dp/device-test.sh prebuild   # HERE (Go + gcc, no CUDA needed): writes .devbin/dp.test
#   bash gpu/dp/device-test.sh run        # on the GPU machine (nvcc, NCCL): builds the kernels and
#                                         # the NCCL shim as shared libraries, runs the tests
#   bash gpu/dp/device-test.sh multi      # on a machine with ≥ 2 GPUs: issue 16's measurement run,
#                                         # everything in one command of at most 9 minutes
#   bash gpu/dp/device-test.sh libs       # only the libraries (what run and multi start with)
#
# prebuild links the test binary against stand-ins of libt2cuda.so and libt2nccl.so (the t2_* and
# t2n_* symbols of the two plain-C headers) with --as-needed, so the binary needs nothing of CUDA
# or NCCL itself; run builds the real libraries with the machine's nvcc and NCCL (NCCL_HOME, by
# default the nvidia-nccl wheel next to PyTorch) and puts them first on LD_LIBRARY_PATH.
# Where Go is on the GPU machine, `make gpu-dp-test` does the same in one step.
#
# multi runs, each stage under its own `timeout` inside one overall budget (T2_MULTI_BUDGET seconds,
# default 540), a failed or timed-out stage not stopping the next:
#   1. libs: the CUDA and NCCL libraries (nvcc -j$(nproc));
#   2. correctness: the tests matching 'NCCL|CUDA' (two GPUs = one GPU, sharded-checkpoint resume,
#      NCCL world 1 = plain CUDA, the memory model against the allocator);
#   3. go-scale: BenchmarkDataParallelStep, Qwen3-1.7B at T2_DP_TOKENS_PER_GPU (16384) tokens per GPU
#      on 1, 2 (and 4, 8 where present) GPUs, τ²-tree and causal-chain micro-batches;
#   4. fsdp2-1gpu, fsdp2-Ngpu: gpu/dp/pytorch/fsdp2_bench.py for 1.7B on 1 GPU and on all GPUs;
#   5. fsdp2-8b: the FSDP2 script for 8B on all GPUs, run only if its memory estimate fits;
#   6. go-8b: BenchmarkDataParallelStep for Qwen3-8B on all GPUs: the memory model's verdict (on
#      2×80 GB it does not fit: 12 B/param per rank) instead of an out-of-memory, or the run where
#      it fits (4 × H200: 9 B/param, 90 GB per GPU with activations), with the budget's remainder;
# then writes summary.md (stages, test verdicts, one table of every DPSCALE line), dpscale.jsonl and
# the logs, flat, into $OUT (or gpu-report/). NCCL_NVLS_ENABLE=0 and
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 for everything.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(git rev-parse --show-toplevel 2>/dev/null || (cd "$(dirname "$0")/../.." && pwd))"
# nccl_home: NCCL's headers and library (NCCL_HOME, else the nvidia-nccl wheel, else CUDA_HOME).
nccl_home() {
  echo "${NCCL_HOME:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || echo "${CUDA_HOME:-/usr/local/cuda}")}"
}

# libpath: the LD_LIBRARY_PATH for .devbin/dp.test: the built libraries, NCCL's and CUDA's.
libpath() {
  local nccllib
  nccllib=$(dirname "$(ls "$(nccl_home)"/lib*/libnccl.so* 2>/dev/null | head -1)")
  echo "$PWD/.devbin/lib:$nccllib:${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}"
}

case ${1:-} in
prebuild)
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.devbin/' "$exclude" 2>/dev/null || echo '/.devbin/' >>"$exclude"
  stub=.devbin/dpstub
  bash gpu/stub-libs.sh "$stub"
  CGO_ENABLED=1 CGO_LDFLAGS="-Wl,--as-needed -L$PWD/$stub" \
    go test -tags cuda -c -ldflags='-s -w' -o .devbin/dp.test ./gpu/dp/
  echo "device-test: .devbin/dp.test ($(du -h .devbin/dp.test | cut -f1)) needs:" \
    $(readelf -d .devbin/dp.test | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
  ;;
libs)
  # The kernels and the NCCL shim as shared libraries for .devbin/dp.test (LD_LIBRARY_PATH: libpath).
  cuda=${CUDA_HOME:-/usr/local/cuda}
  nccl=$(nccl_home)
  nccllib=$(dirname "$(ls "$nccl"/lib*/libnccl.so* 2>/dev/null | head -1)")
  mkdir -p .devbin/lib
  make -f gpu/cuda/gpu.mk -j"$(nproc)" gpu/cuda/build/libt2cuda.so CUDA_HOME="$cuda"
  cp gpu/cuda/build/libt2cuda.so .devbin/lib/
  nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -I"$nccl/include" gpu/collective/nccl/csrc/t2nccl.cu \
    -o .devbin/lib/libt2nccl.so -L"$nccllib" -l:"$(basename "$(ls "$nccllib"/libnccl.so* | head -1)")" -lcudart
  echo "device-test: libraries built ($(ls .devbin/lib | tr '\n' ' ')); NCCL from $nccllib"
  ;;
run)
  export NCCL_NVLS_ENABLE=0 # never NVLink SHARP multicast (docs/MULTIGPU.md)
  OUT=${OUT:-$PWD/gpu-report}
  mkdir -p "$OUT"
  bash "$self" libs >"$OUT/dp-build.log" 2>&1 || { tail -20 "$OUT/dp-build.log"; exit 1; }
  export LD_LIBRARY_PATH=$(libpath)
  cd gpu/dp
  ../../.devbin/dp.test -test.v -test.count=1 -test.run "${T2_TEST_RUN:-CUDA|NCCL}" 2>&1 | tee "$OUT/dp-test.log"
  ;;
multi)
  set +e +o pipefail # a failed stage must not stop the others
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 # never NVLink SHARP multicast
  OUT=${OUT:-$PWD/gpu-report}
  mkdir -p "$OUT"
  budget=${T2_MULTI_BUDGET:-540}
  start=$(date +%s)
  stages=$(mktemp)
  env_txt=$(mktemp)
  root=$PWD
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  {
    date -u
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -12
    nvcc --version 2>&1 | tail -2
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", torch.cuda.nccl.version(), "transformers", transformers.__version__)' 2>&1 | tail -1
    echo "nproc $(nproc); NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST"
  } >"$env_txt" 2>&1
  cat "$env_txt"
  # stage NAME LIMIT LOG CMD...: CMD under timeout (LIMIT, or what is left of the budget less 20 s
  # for the summary), output appended to $OUT/LOG, status recorded for the summary.
  stage() {
    local name=$1 limit=$2 log=$3 left t s0 rc status
    shift 3
    left=$((start + budget - 20 - $(date +%s)))
    if ((left < 15)); then
      echo "$name|not run: the ${budget}s budget is spent|0|$limit" >>"$stages"
      echo "== $name: not run, the budget is spent" | tee -a "$OUT/$log"
      return
    fi
    t=$((limit < left ? limit : left))
    echo "== $name (timeout ${t}s): $*" | tee -a "$OUT/$log"
    s0=$(date +%s)
    timeout -k 15 "$t" "$@" >>"$OUT/$log" 2>&1
    rc=$?
    case $rc in
    0) status=ok ;;
    124 | 137) status="timed out after ${t}s" ;;
    *) status="failed (exit $rc)" ;;
    esac
    echo "$name|$status|$(($(date +%s) - s0))|$t" >>"$stages"
    echo "== $name: $status in $(($(date +%s) - s0))s" | tee -a "$OUT/$log"
    grep -h '^DPSCALE\|^--- \(PASS\|FAIL\|SKIP\)\|^dp-scale: .*skipped\|^fsdp2: .*skipped' "$OUT/$log" | tail -8
  }
  m17=$root/deploy/models/qwen3-1.7b/config.json
  m8=$root/deploy/models/qwen3-8b/config.json
  all=$(seq -s, 0 $((ngpu > 0 ? ngpu - 1 : 0)))
  devs=0 # 1 GPU, then 2, 4 and 8 as far as the machine has them; T2_DP_DEVICES replaces the list
  for n in 2 4 8; do ((ngpu >= n)) && devs="$devs;$(seq -s, 0 $((n - 1)))"; done
  devs=${T2_DP_DEVICES:-$devs}
  export LD_LIBRARY_PATH=$(libpath)
  export T2_DP_TOKENS_PER_GPU=${T2_DP_TOKENS_PER_GPU:-16384}
  bench=(-test.run '^$' -test.bench DataParallelStep -test.benchtime 1x -test.v)
  fsdp=(python3 -m torch.distributed.run --standalone)
  stage libs 300 build.log bash "$self" libs
  stage correctness 200 correctness.log bash -c 'cd gpu/dp && exec ../../.devbin/dp.test -test.v -test.count=1 -test.run "NCCL|CUDA" -test.timeout 190s'
  stage go-scale-1.7b 220 go-scale.log env T2_DP_MODEL="$m17" T2_DP_DEVICES="$devs" .devbin/dp.test "${bench[@]}"
  stage fsdp2-1.7b-${ngpu}gpu 170 fsdp2-ngpu.log "${fsdp[@]}" --nproc_per_node "$ngpu" gpu/dp/pytorch/fsdp2_bench.py --config "$m17" --tokens-per-gpu "$T2_DP_TOKENS_PER_GPU" --skip-if-no-fit
  stage fsdp2-1.7b-1gpu 150 fsdp2-1gpu.log "${fsdp[@]}" --nproc_per_node 1 gpu/dp/pytorch/fsdp2_bench.py --config "$m17" --tokens-per-gpu "$T2_DP_TOKENS_PER_GPU" --skip-if-no-fit
  stage fsdp2-8b-${ngpu}gpu 120 memory-8b.log "${fsdp[@]}" --nproc_per_node "$ngpu" gpu/dp/pytorch/fsdp2_bench.py --config "$m8" --tokens-per-gpu "$T2_DP_TOKENS_PER_GPU" --skip-if-no-fit
  # Last, with what is left: an 8B rank took ~36 s to build (four one after another: 145 s on
  # 4 × H200; they are built concurrently since), then 8 steps of ~2.4 s.
  stage go-8b 400 memory-8b.log env T2_DP_MODEL="$m8" T2_DP_DEVICES="$all" T2_DP_SHAPES=tree,chain .devbin/dp.test "${bench[@]}"
  python3 gpu/dp/dpscale_summary.py --stages "$stages" --env "$env_txt" --out "$OUT/summary.md" --jsonl "$OUT/dpscale.jsonl" \
    "$OUT"/correctness.log "$OUT"/go-scale.log "$OUT"/memory-8b.log "$OUT"/fsdp2-1gpu.log "$OUT"/fsdp2-ngpu.log
  rm -f "$stages" "$env_txt"
  echo "device-test: multi done in $(($(date +%s) - start))s; $(ls "$OUT" | tr '\n' ' ')in $OUT"
  ;;
*)
  echo "usage: $0 prebuild|run|multi|libs" >&2
  exit 2
  ;;
esac
