#!/usr/bin/env bash
# learn-prebuilt.sh: `make learn` for a GPU machine without Go (binaries from prebuild-gpu-bins.sh,
# the τ² data and tokenizer as .devbin/assets.tar.xz).  start ARGS… | start-many FILE | start-seq FILE | wait.
# start builds the real kernels' shared libraries, unpacks the prebuilt binaries and the τ² data,
# runs the NCCL world-1 check, then starts `tau2-run experiment` detached; wait follows it and
# copies the results to $OUT. start-many starts one experiment per line of FILE ("NAME ARGS…",
# shell-quoted; # comments), all at once on the same GPU (several seeds or recipes in one lease:
# give each sampler a small kv.memory_fraction), and collects each run as $OUT/NAME.tgz.
# start-seq runs the lines of FILE one after another instead (detached, so later `wait` calls
# follow it; $T/seq.log says which line runs): for runs that each need the whole machine, such as
# the several-GPU layouts of issue 29 (deploy/scripts/issue29/*.runs), collected the same way.
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/../.."
T=${T2_DIR:-/tmp/t2} # where the binaries, data and runs go (T2_DIR: the tests')
mode=${1:-start}; shift || true
export NCCL_NVLS_ENABLE=0
cudalib=${CUDA_HOME:-/usr/local/cuda}/lib64
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || echo /usr/local/cuda)
ncclso=$(ls $NCCL_HOME/lib/libnccl.so* 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$T/lib:$cudalib:$(dirname "${ncclso:-/x/x}"):${LD_LIBRARY_PATH:-}
export TAU2_DATA_DIR=$T/tau2-data QWEN3_TOKENIZER_DIR=$T/qwen3-tokenizer
# running: an experiment runs, or a start-seq queue has lines left (between two of its runs no
# tau2-run is up for a moment).
running() { pgrep -f 'tau2-run experiment' >/dev/null || [[ -f $T/seq.running ]]; }
if [[ $mode == run-seq ]]; then # start-seq's detached queue: one experiment per line, in order
  trap 'rm -f $T/seq.running' EXIT
  touch $T/seq.running
  while read -r name rest; do
    [[ -z $name || $name == \#* ]] && continue
    eval "args=($rest)"
    mkdir -p $T/runs/$name
    echo "$(date -u +%FT%TZ) start $name: ${args[*]}" >>$T/seq.log
    $T/bin/tau2-run experiment bin=$T/bin dir=$T/runs/$name "${args[@]}" >$T/runs/$name/exp.log 2>&1 </dev/null
    rc=$? # before the date below replaces $?
    echo "$(date -u +%FT%TZ) end $name: exit $rc" >>$T/seq.log
  done <"$1"
  exit 0
fi
progress() {
  [[ -f $T/seq.log ]] && { echo "== $T/seq.log"; cat $T/seq.log; }
  if [[ -d $T/runs ]]; then
    for l in $T/runs/*/exp.log; do echo "== $l"; tail -n 6 "$l"; done
  else
    tail -n 25 $T/exp.log 2>/dev/null
  fi
}
collect_many() {
  for r in $T/runs/*/; do
    name=$(basename "$r")
    d=$(ls -d "$r"*/ 2>/dev/null | tail -1)
    [[ -n $d ]] || { cp "$r/exp.log" "$OUT/$name.log" 2>/dev/null; continue; }
    (cd "$d" && find . -maxdepth 2 \( -name '*.log' -o -name '*.json' -o -name '*.md' -o -name 'steps.jsonl' -o -name '*.jsonl' \) -size -20M -print0 |
      tar --null -T - -czf "$OUT/$name.tgz" ../exp.log figures) 2>/dev/null
  done
}
collect() {
  [[ -d $T/runs ]] && { collect_many; return; }
  d=$(ls -d $T/run/*/ 2>/dev/null | tail -1)
  [[ -n $d ]] || return
  cp $T/exp.log "$OUT/" 2>/dev/null
  for f in report.md report.json; do [[ -f $d/$f ]] && cp "$d/$f" "$OUT/"; done
  # Few, small files (the device tool returns at most 8, 16 MiB each): the figures in one
  # archive, the logs and JSON without the broker's data, the Parquet files or the weights.
  tar -C "$d" -czf "$OUT/figures.tgz" figures 2>/dev/null
  (cd "$d" && find . -maxdepth 2 \( -name '*.log' -o -name '*.json' -o -name 'steps.jsonl' \) -size -20M -print0 |
    tar --null -T - -czf "$OUT/run-logs.tgz") 2>/dev/null
  # (where only report.json came back, `tau2-eval plot report=report.json` redraws the figures)
}
if [[ $mode == start || $mode == start-many || $mode == start-seq ]]; then
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  mkdir -p $T/lib && tar -C $T -xJf .devbin/bins.tar.xz && tar -C $T -xJf .devbin/assets.tar.xz
  ( make -f gpu/cuda/gpu.mk -j16 gpu/cuda/build/libt2cuda.so NCCL_HOME=$NCCL_HOME gpu/collective/nccl/build/libt2nccl.a >$T/build.log 2>&1 &&
    cp gpu/cuda/build/libt2cuda.so $T/lib/ &&
    g++ -shared -o $T/lib/libt2nccl.so gpu/collective/nccl/build/t2nccl.o -L$(dirname "$ncclso") -l:$(basename "$ncclso") -L$cudalib -lcudart ) ||
    { tail -30 $T/build.log; echo BUILD FAILED; exit 1; }
  echo "built kernels in ${SECONDS}s"
  if [[ -x .devbin/dp.test ]]; then
    timeout 120 .devbin/dp.test -test.run 'CUDA|NCCL' -test.v 2>&1 | tail -25 | tee $OUT/dp-test.log
  fi
  if [[ $mode == start ]]; then
    setsid nohup $T/bin/tau2-run experiment bin=$T/bin dir=$T/run "$@" >$T/exp.log 2>&1 < /dev/null &
  elif [[ $mode == start-seq ]]; then
    [[ -f $1 ]] || { echo "start-seq: no run list $1"; exit 2; }
    cp "$1" $T/seq.lines && rm -f $T/seq.log
    touch $T/seq.running # before the detached queue starts: the wait below must not end first
    setsid nohup bash "$self" run-seq $T/seq.lines >$T/seq.out 2>&1 </dev/null &
    grep -v '^[[:space:]]*\(#\|$\)' $T/seq.lines | awk '{print "queued " $1}'
  else
    while read -r name rest; do
      [[ -z $name || $name == \#* ]] && continue
      eval "args=($rest)"
      mkdir -p $T/runs/$name
      setsid nohup $T/bin/tau2-run experiment bin=$T/bin dir=$T/runs/$name "${args[@]}" >$T/runs/$name/exp.log 2>&1 < /dev/null &
      echo "started $name: ${args[*]}"
    done < "$1"
  fi
  sleep 2
fi
end=${WAIT_END:-540}
while (( SECONDS < end )); do
  running || break
  sleep 15
done
progress
running && echo "STILL RUNNING" || echo "EXPERIMENT DONE"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
collect
